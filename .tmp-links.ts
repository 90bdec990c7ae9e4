import { readFileSync, readdirSync } from "node:fs";
import { analyze } from "./ingest/nlp/engine.ts";
const dir = "../shared/eval/pdnc-dev";
for (const n of readdirSync(dir).sort()) {
  let text: string; try { text = readFileSync(`${dir}/${n}/novel_text.txt`, "utf8"); } catch { continue; }
  const a = analyze(text);
  const { quotes } = a.scan; const { speaker, mentionStart } = a.attribution;
  const isDesc = (id: number) => { const c = a.chars[id]!; return c.heads.size > 0 && c.firsts.size === 0 && c.lasts.size === 0; };
  const name = (id: number) => [...a.chars[id]!.forms].sort((x, y) => y[1] - x[1])[0]?.[0] ?? `#${id}`;
  const starts = a.names.map((m) => m.start);
  const tagged = new Map<number, number>(); const mentioned = new Map<string, number>(); const together = new Map<string, number>();
  const bump = (m: Map<any, number>, k: any) => m.set(k, (m.get(k) ?? 0) + 1);
  for (let i = 0; i < quotes.length; i++) {
    const d = speaker[i]!; if (d < 0 || mentionStart[i]! < 0 || !isDesc(d) || !a.chars[d]!.person) continue;
    bump(tagged, d);
    const lo = quotes[Math.max(0, i - 6)]!.start, hi = quotes[Math.min(quotes.length - 1, i + 6)]!.end;
    const seen = new Set<number>(); const spk = new Set<number>();
    for (const m of a.names) if (m.start >= lo && m.start <= hi && m.char >= 0 && m.char !== d && !isDesc(m.char)) seen.add(m.char);
    for (let j = Math.max(0, i - 6); j <= Math.min(quotes.length - 1, i + 6); j++) if (speaker[j]! >= 0 && speaker[j] !== d && mentionStart[j]! >= 0) spk.add(speaker[j]!);
    for (const c of seen) bump(mentioned, `${d} ${c}`);
    for (const c of spk) bump(together, `${d} ${c}`);
  }
  for (const [d, t] of tagged) {
    if (t < 5) continue;
    const rows = [...mentioned].filter(([k]) => k.startsWith(`${d} `)).map(([k, v]) => { const c = Number(k.split(" ")[1]); return { c, v, tog: together.get(k) ?? 0 }; }).sort((x, y) => y.v - x.v).slice(0, 4);
    console.log(`${n} ${name(d)} tagged=${t} g=${a.chars[d]!.gender}: ` + rows.map((r) => `${name(r.c)}(${a.chars[r.c]!.gender}) m=${r.v} tog=${r.tog}`).join("; "));
  }
}
