"""cotdyn: chain-of-thought answer-entropy trajectories, measured reproducibly."""

__version__ = "0.1.0"
