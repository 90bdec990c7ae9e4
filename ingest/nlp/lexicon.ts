// Closed word lists the engine relies on. General English knowledge only: nothing here names a
// particular book.

export type Gender = "m" | "f";

const words = (s: string): Set<string> => new Set(s.trim().split(/\s+/));

/** Titles before a name, lower-cased without the period, with the gender they imply (if any). */
export const HONORIFICS = new Map<string, Gender | undefined>();
for (const w of "mr master monsieur m sir lord father brother uncle count baron duke prince king emperor signor herr don senor earl marquis squire".split(" "))
  HONORIFICS.set(w, "m");
for (const w of "mrs ms miss mistress madam madame mme mlle mademoiselle lady dame sister aunt countess baroness duchess princess queen signora frau fraulein dona senora marchioness".split(" "))
  HONORIFICS.set(w, "f");
for (const w of "dr doctor professor prof cousin president governor".split(" ")) HONORIFICS.set(w, undefined);
/** Ranks and offices that in most fiction name men; a weaker prior than Mr. or Sir. */
export const MOSTLY_MALE_TITLES = words(
  "rev reverend captain capt colonel col major general gen lieutenant lieut lt sergeant sgt admiral commander inspector constable judge bishop parson",
);
for (const w of MOSTLY_MALE_TITLES) HONORIFICS.set(w, undefined);

/**
 * Military and noble ranks, and the courtesy titles that stand for them abroad: one person may be
 * called by several ("General Kutúzov" and "Prince Kutúzov"), where Mr., Mrs., Miss or Lady before a
 * surname tell a family's members apart.
 */
export const MILITARY_RANKS = words("general colonel major captain admiral lieutenant commander");
export const RANKS = new Set([
  ...MILITARY_RANKS,
  ...words(`
  prince princess count countess duke duchess baron baroness marquis marchioness earl
  madame monsieur
`),
]);

/** Titles of several people at once ("Mesdames Callendar", "Messrs. Hale and Co."). */
export const PLURAL_TITLES = words("mesdames messrs messrs. messieurs mmes");

/** Titles that also go before a first name ("Miss Elizabeth", "Sir Walter"); others take a surname. */
export const FIRST_NAME_TITLES = words(
  "miss lady sir lord master dame mistress uncle aunt cousin father sister brother prince princess king queen don dona madame mademoiselle",
);

/** Lower-case words that join parts of one name ("Lady Catherine de Bourgh"). */
export const NAME_PARTICLES = words("de du da di del della van von der le la st st.");

/** Capitalised words that are never (part of) a character's name. */
export const NOT_NAMES = words(`
  i i'm i'll i've i'd the a an and but or nor if oh o ah ahem aye nay yes no well now then there here
  this that these those what why how when where who whom whose which my your his her its our their
  he she it we they you me him us them not so as at by for from in into of on to up with without
  mine yours hers ours theirs let do does did don't can could shall should will would may might must
  is are was were be been am has have had all any some every each both either neither none one two
  three four five six seven eight nine ten first second third last next very much many more most
  god lord heaven heavens christ jesus providence devil satan hell
  sir madam ma'am miss mrs mr dear dearest good poor old young little great
  mamma mama papa pa ma mother father aunt uncle grandmother grandfather cousin brother sister
  monday tuesday wednesday thursday friday saturday sunday
  christmas easter michaelmas whitsuntide lent
  chapter volume book part letter preface introduction contents appendix finis end
  indeed upon pray thank thanks
  perhaps nothing something everything anything nobody everybody somebody anybody
  mister madame monsieur mademoiselle signor signora herr frau
  esq esquire other latter former same rest whole transcriber transcribers
`);
/** Months: no name, but a month before a name after "the" is part of it ("the March Hare", "the May Queen"). */
export const MONTHS = words("january february march april may june july august september october november december");
for (const m of MONTHS) NOT_NAMES.add(m);

/** Verbs of a credit line: the names after "Edited by", "Produced by"… made the book, they are not in it. */
export const CREDIT_VERBS = words(`
  written produced edited translated transcribed illustrated compiled prepared digitized digitised
  annotated adapted revised proofread scanned
`);

/** Labels of a credit ("Author: Jane Austen", "Editor: …"). */
export const CREDIT_LABELS = words(`
  author authors editor editors translator translators transcriber transcribers illustrator
  illustrators compiler producer credits
`);

/** Nations, peoples and faiths: words for groups, never a character's name, in the plural neither. */
export const DEMONYMS = words(`
  english french italian german american swiss roman scotch scottish irish indian european
  christian catholic protestant jewish dutch spanish russian chinese japanese greek turkish
  british welsh portuguese austrian prussian african asiatic hindoo hindu negro anglo moslem muslim
  islam mohammedan englishman englishwoman frenchman frenchwoman scotchman scotsman irishman dutchman
`);
for (const w of DEMONYMS) NOT_NAMES.add(w);

/**
 * Exclamations, never names in themselves; but a book may name a character with one ("Pooh"), and
 * then the word is the subject of dialogue tags ("said Pooh"), which no exclamation ever is.
 */
export const INTERJECTIONS = words(`
  hush alas hurrah hullo hello goodbye bye adieu farewell tis twas ay eh hey ha haha hm hmm humph
  pshaw bah pooh tut fie lo hurray huzza ahoy
`);
for (const w of INTERJECTIONS) NOT_NAMES.add(w);

/** Words after a capitalised word that make it a place, not a person ("Netherfield Park"). */
export const PLACE_HEADS = words(`
  street road square park place lane court hall house abbey castle bridge church hill cottage lodge
  manor gardens garden terrace row station river lake mountain mountains valley wood woods forest
  island isle bay sea ocean city town village county shire college school hospital hotel inn
  chapel cathedral palace tower gate gates common heath downs fields field farm mill
  avenue crescent green wharf dock docks quay harbour harbor cross buildings rooms office
  parsonage vicarage rectory workhouse prison gaol jail club bungalow mosque temple museum
`);

/**
 * Place heads that end a street's name, which may open with a title ("King Edward Street", "Queen
 * Anne Terrace", "St. James's Square"): a titled name ending in one is a street, not a person.
 */
export const THOROUGHFARES = words("street road lane square place terrace avenue crescent row gardens walk");
for (const w of THOROUGHFARES) PLACE_HEADS.add(w);

/** Compass points: a name they begin ("the North Pole", "South Africa") is a place. */
export const COMPASS_POINTS = words("north south east west northern southern eastern western");

export const PREPOSITIONS = words(
  "of in on at by for with from to into upon about over under through after before between against during without within among towards toward across behind beyond near since till until",
);

/** Prepositions after which a person is in the scene, if not its subject ("she met with Tom"). */
export const COMPANY_PREPOSITIONS = words("with towards toward beside near");

/** Prepositions after which a capitalised word is more likely a place than a person. */
export const PLACE_PREPOSITIONS = words("in at into near through across via within beyond");

/** Speech verbs in the forms that appear in dialogue tags. */
export const SPEECH_VERBS = words(`
  said says say saying replied replies reply answered answers answer cried cries asked asks ask
  exclaimed exclaims continued continues added adds returned returns observed observes remarked
  remarks whispered whispers muttered mutters shouted shouts called calls began begins rejoined
  interrupted interrupts repeated repeats insisted insists explained explains declared declares
  murmured murmurs protested protests retorted retorts responded responds inquired inquires
  enquired enquires resumed resumes suggested suggests urged urges pursued pursues ejaculated
  demanded demands screamed screams sobbed sobs sighed sighs laughed laughs groaned groans growled
  growls snapped snaps stammered stammers faltered falters gasped gasps pleaded pleads persisted
  persists admitted admits agreed agrees assented assents concluded concludes conceded concedes
  echoed echoes grumbled grumbles hazarded ventured ventures yelled yells roared roars panted pants
  shrieked shrieks moaned moans noted notes commented comments proceeded proceeds chimed drawled
  lisped piped squeaked bawled bellowed hissed mumbled sneered smiled smiles thought thinks
  told tells wrote writes read reads added observed cried went sang sings shrieked wailed wailed
  whimpered stuttered blurted confessed announced recommended objected reasoned argued argues
  explained replied resumed rejoined broke interposed interposes corrected remonstrated answered
  began begun spoke speaks spoken called sneezed grunted chuckled giggled screeched
  contradicted subjoined uttered acknowledged commanded affirmed proclaimed chorused boomed quavered
  sputtered implored howled adding replying exclaiming answering observing remarking
  snarled snarls
`);

/** Speech verbs made of a verb and a particle ("put in", "broke out"): the verb, and its particles. */
export const PHRASAL_SPEECH_VERBS = new Map<string, Set<string>>([
  ["put", words("in")],
  ["broke", words("in out forth")],
  ["burst", words("out forth")],
  ["chimed", words("in")],
  ["cut", words("in")],
  ["struck", words("in")],
  ["summed", words("up")],
]);

/** Nouns for what someone said, in "was his answer", "was Elizabeth's reply", "was Ronny's explanation". */
export const REPLY_NOUNS = words(`
  answer reply response rejoinder retort remark exclamation observation comment question cry thought
  assurance explanation reflection greeting salutation conclusion apology objection protest suggestion
  inquiry enquiry advice verdict declaration reproach reasoning complaint request entreaty whisper
  warning speech language
`);

export const MALE_PRONOUNS = words("he him his himself");
export const FEMALE_PRONOUNS = words("she her hers herself");
export const FIRST_PERSON = words("i me my mine myself");
export const SECOND_PERSON = words("you your yours yourself");

/** Common given names with their usual gender: a prior that pronoun evidence can override. */
export const GIVEN_NAMES = new Map<string, Gender>();
for (const w of `john james william george charles thomas henry robert edward richard joseph frederick
  arthur walter francis samuel david peter paul michael harry jack tom dick ned will bill bob jim
  fred frank ben benjamin edmund edgar albert alfred ernest herbert hugh philip ralph roger stephen
  anthony andrew alexander daniel matthew mark luke simon nicholas oliver patrick timothy lewis louis
  jonathan nathaniel christopher isaac jacob abraham adam harold horace jasper lawrence leonard
  martin maurice reginald rupert sidney theodore victor vincent wilfred eugene giles guy godfrey
  ferdinand sebastian tristram humphrey gilbert geoffrey teddy randolph`.split(/\s+/))
  GIVEN_NAMES.set(w, "m");
for (const w of `mary elizabeth jane anne ann catherine margaret sarah emma charlotte harriet lucy
  susan maria martha eleanor elinor fanny louisa caroline julia sophia frances alice ellen helen
  isabella kitty lydia georgiana dorothy agnes amelia clara edith emily esther grace hannah lizzy
  eliza betsy betty nancy polly molly sally annie daisy rose rosa violet lily florence beatrice
  cecilia cecily diana flora henrietta laura lucy marianne matilda millie minnie nelly penelope
  rebecca ruth sophy adela adelaide arabella augusta bella bertha clarissa constance edna ethel
  evelyn gertrude gwendolen hester ida irene jessie josephine judith kate katherine letitia
  lucinda mabel madeline maud nora olivia phoebe priscilla rachel rosamond sylvia theresa ursula
  victoria winifred janny jenny`.split(/\s+/))
  GIVEN_NAMES.set(w, "f");

/**
 * Nouns that say only a person's gender ("said the young man", "said his wife"): a dialogue tag
 * built on one is resolved like he/she, never made into a character of its own.
 */
export const GENDERED_NOUNS = new Map<string, Gender>();
for (const w of "man gentleman boy fellow youth lad husband father son brother uncle nephew master sir".split(" ")) GENDERED_NOUNS.set(w, "m");
for (const w of "woman lady girl lass wife mother daughter sister aunt niece mistress madam widow".split(" ")) GENDERED_NOUNS.set(w, "f");

/** Gendered nouns for the unmarried: "said the girl" is not anyone the book calls "Mrs.". */
export const UNMARRIED_NOUNS = words("girl lass");

/** Familiar forms of given names ("Lizzy" is Elizabeth), so they join the same character. */
export const NICKNAMES = new Map<string, string[]>();
for (const line of `elizabeth: lizzy lizzie liz eliza beth betsy bess bessie betty
  catherine: kitty kate katie kit
  katherine: kitty kate katie
  frances: fanny
  mary: polly molly mamie
  ellen: nelly nell
  helen: nelly nell
  eleanor: nelly nell
  susan: sukey sue susie
  martha: patty patsy
  margaret: peggy meg maggie
  dorothy: dolly dora
  thomas: tom tommy
  richard: dick dickon
  robert: bob bobby robin
  william: bill billy will willy
  john: jack johnny
  edward: ned ted teddy
  henry: harry hal
  james: jim jimmy jem jemmy
  charles: charley charlie
  frederick: fred freddy
  samuel: sam sammy
  benjamin: ben
  joseph: joe
  nicholas: nick
  anthony: tony
  andrew: andy
  daniel: dan
  philip: phil
  walter: walt`.split("\n")) {
  const [full, rest] = line.split(":");
  for (const nick of rest!.trim().split(/\s+/)) NICKNAMES.set(nick, [...(NICKNAMES.get(nick) ?? []), full!.trim()]);
}
