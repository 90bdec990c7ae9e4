"""Runs BookNLP on one book for the ingest worker (the command BOOKNLP_COMMAND names).

    python3 booknlp_runner.py [--model big|small] [--model-path DIR] <input.txt> <output_dir> <book_id>
    python3 booknlp_runner.py [--model big|small] [--model-path DIR] --download-only

BookNLP writes <output_dir>/<book_id>.tokens, .entities, .quotes, .supersense and .book; the worker
parses them. --download-only loads the models (downloading them when missing) and exits, so an image
can fetch them at build time. Exit status: 0 on success, 1 when BookNLP fails, 2 on bad arguments.
"""

import argparse
import os
import sys

PIPELINE = "entity,quote,supersense,event,coref"


def parse_args(argv):
    parser = argparse.ArgumentParser(description="Run BookNLP on one plain-text book.")
    parser.add_argument("--model", choices=["big", "small"], default="big")
    parser.add_argument("--model-path", help="folder holding the BookNLP models (default: ~/booknlp_models)")
    parser.add_argument("--download-only", action="store_true", help="fetch the models and exit")
    parser.add_argument("paths", nargs="*", metavar="input output_dir book_id")
    args = parser.parse_args(argv)
    if not args.download_only and len(args.paths) != 3:
        parser.error("expected <input.txt> <output_dir> <book_id>")
    return args


def load(args):
    # Imported here so that argument errors are reported without loading torch.
    from booknlp.booknlp import BookNLP

    params = {"pipeline": PIPELINE, "model": args.model}
    if args.model_path:
        params["model_path"] = args.model_path
    return BookNLP("en", params)


def main(argv):
    args = parse_args(argv)
    try:
        booknlp = load(args)
        if args.download_only:
            return 0
        input_path, output_dir, book_id = args.paths
        if os.path.getsize(input_path) == 0:
            print("input file is empty: %s" % input_path, file=sys.stderr)
            return 1
        booknlp.process(input_path, output_dir, book_id)
    except Exception as err:  # the worker shows the last lines of stderr as the book's error
        print("BookNLP failed: %s: %s" % (type(err).__name__, err), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
