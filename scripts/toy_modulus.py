"""The toy experiment's LLM3 under modulus 300 and under the prime modulus (seed 000, Table 1).

The known gap of the default toy: at full size IG's false-positive rate on LLM3 is well above the
paper's 6%, because the supervisor partly learns multiplication mod 300 from the prompt, so the
(correct) multiply step gains little (``cotdyn.methods.infogain.toy`` docstring). This runs LLM3 alone,
exactly as ``toy_experiment`` does (same seeds, split and models), under a preset and its ``-prime``
twin, and prints Table 1 (wrong-answer chains, primary scores) for both, with the paper's figures.

    python scripts/toy_modulus.py --size reduced [--seed 0] [--out DIR]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from cotdyn.files.writers import write_csv
from cotdyn.methods.infogain import toy
from cotdyn.methods.infogain.experiment.models import run_model
from cotdyn.methods.infogain.experiment.presets import _seed, resolve_size
from cotdyn.methods.infogain.experiment.summaries import _fall_margin, detection_table, table1_frame
from cotdyn.methods.infogain.gain import largest_fall_step

LLM3 = 3


def llm3_table1(size: str, seed: int) -> pd.DataFrame:
    """Table 1 of LLM3 under ``size``, as toy_experiment computes it (LLM3's seeds and split)."""
    params = resolve_size(size)
    model = toy.toy_models(params["error_rate"], params["error_values"], params["modulus"])[LLM3 - 1]
    x0 = toy.sample_prompts(params["n_problems"], np.random.default_rng(_seed(seed, 0, 0)), params["modulus"])
    splits = toy.split_indices(len(x0), params["split"], np.random.default_rng(_seed(seed, 0, 1)))
    started = time.perf_counter()
    run = run_model(model, x0, splits, params, seed, LLM3)
    table = table1_frame(pd.DataFrame(detection_table(model.name, run)), model.name)
    wrong = ~run["traces"]["test"].correct
    # the ORM check of toy_experiment's acceptance: wrong-answer chains' mean probability falls most at step 2
    orm = run["orm_test"][wrong].mean(axis=0)
    return table.assign(
        orm_fall_step=largest_fall_step(orm),
        orm_step2_margin=_fall_margin(orm, 2)["margin"],
        size=size,
        modulus=params["modulus"],
        n_test_chains=len(wrong),
        n_wrong_test_chains=int(wrong.sum()),
        seconds=round(time.perf_counter() - started, 1),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="reduced", choices=["reduced", "full"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--prime-only", action="store_true", help="run only the -prime preset")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    sizes = ([] if args.prime_only else [args.size]) + [f"{args.size}-prime"]
    table = pd.concat([llm3_table1(s, args.seed) for s in sizes], ignore_index=True)
    primary = table[table["primary"]]
    columns = ["size", "modulus", "method", "accuracy", "tpr", "fpr", "paper_accuracy", "paper_tpr", "paper_fpr",
               "n_wrong_test_chains", "orm_fall_step", "orm_step2_margin", "seconds"]  # fmt: skip
    print(primary[columns].to_string(index=False))
    if args.out:
        write_csv(table, args.out / f"llm3_table1_{args.size}_seed{args.seed}.csv")


if __name__ == "__main__":
    main()
