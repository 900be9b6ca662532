"""Whether float32 transformers regeneration on this CPU is token-exact (issue 35, docs/tamper-evidence.md).

    python scripts/regeneration_exactness.py results/<study> [--threads 1 2]

For a finished study of a transformers model (the embedded SmolLM2, or any local folder), every
request of its raw files is generated again without the cache, as ``cotdyn audit --regenerate``
does, under each torch thread count: once each request alone (one request per call), once in its
original batch (the file's requests in the chunks of the model's ``chunk_size`` that generation
used). Printed: per setting, the requests and samples token-exact (token ids, text and finish
reason equal to the stored row), and the seconds taken. Exits 1 if any sample differs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from cotdyn.audit.regenerate import compare, stored_requests
from cotdyn.audit.study_model import study_model
from cotdyn.audit.untrusted import admit
from cotdyn.audit.view import study_view
from cotdyn.generation.backends import make_backend


def batches(items, chunk_size: int, alone: bool) -> list[list]:
    """Per raw file, its requests one at a time, or in generation's chunks (0: the whole file)."""
    out = []
    for path in sorted({i.path for i in items}):
        group = [i for i in items if i.path == path]
        size = 1 if alone else (chunk_size or len(group))
        out += [group[k : k + size] for k in range(0, len(group), size)]
    return out


def measure(backend, items, chunk_size: int, alone: bool) -> dict:
    started, requests, samples, differing = time.time(), 0, 0, 0
    for batch in batches(items, chunk_size, alone):
        for item, completions in zip(batch, backend.generate([i.request for i in batch])):
            found = compare(item, completions)
            requests += not found
            samples += len(completions) - len(found)
            differing += len(found)
    return {
        "requests_exact": requests,
        "samples_exact": samples,
        "samples_differing": differing,
        "seconds": time.time() - started,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("study_dir")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args(argv)
    study_dir = Path(args.study_dir)
    study = admit(study_dir)
    cells, protocols = study.cells, study.protocols
    items, unread = stored_requests(study_view(study_dir, study.entries, list(study.raw)), study.raw, protocols)
    if unread:
        print(f"not read: {unread}", file=sys.stderr)
        return 1
    spec = cells[items[0].cell]
    entry = study_model(spec, protocols, None)
    if entry["backend"] != "transformers":
        print(f"{study_dir}: a {entry['backend']} study; this measures the transformers backend", file=sys.stderr)
        return 1
    backend = make_backend(entry)
    samples = sum(len(i.rows) for i in items)
    print(
        f"{study_dir}: {len(items)} requests, {samples} samples; model {entry['id']} ({entry['dtype']}), torch {torch.__version__}"
    )
    failed = False
    for threads in args.threads:
        torch.set_num_threads(threads)
        for alone in (True, False):
            r = measure(backend, items, entry.get("chunk_size", 0), alone)
            failed |= r["samples_differing"] > 0
            how = "each request alone" if alone else f"original batches (chunk_size {entry.get('chunk_size', 0)})"
            print(
                f"threads {threads}, {how}: {r['requests_exact']} of {len(items)} requests and "
                f"{r['samples_exact']} of {samples} samples token-exact ({r['seconds']:.0f} s)",
                flush=True,
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
