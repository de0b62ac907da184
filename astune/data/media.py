"""Image and audio files: finding them (a path column or class folders) and checking them.

Decoders are chosen to be light and CPU-only (there is no torchvision or torchaudio here):
Pillow reads images (already a dependency of matplotlib and transformers' image processors);
soundfile reads audio (its wheel ships libsndfile: WAV, FLAC, OGG and MP3, no ffmpeg needed).
Every file's header is opened once at load time, so a missing or unreadable file, or an audio
file whose sampling rate cannot be read, is a one-line error naming the file and the row before
any training starts; the pixels and samples themselves are decoded per batch (``media_batch``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from math import gcd
from pathlib import Path
from typing import Any

from astune.data.cache import astune_cache
from astune.data.errors import DataError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff")
AUDIO_SUFFIXES = (".wav", ".flac", ".ogg", ".mp3")
SUFFIXES = {"image": IMAGE_SUFFIXES, "audio": AUDIO_SUFFIXES}
MEDIA_CACHE_ENV = "ASTUNE_MEDIA_CACHE"
PATH_KEY = "path"
METADATA_FILES = ("metadata.csv", "metadata.jsonl")  # imagefolder/audiofolder's, per split
RATE_KEY = "sampling_rate"
SECONDS_KEY = "seconds"  # an audio clip's length


def default_media_columns(task: str) -> dict[str, str]:
    """The column names class-folder rows get when dataset.json names none."""
    return {f"{task}_column": task, "label_column": "label"}


def has_class_folders(folder: Path, split: str) -> bool:
    """Whether ``folder/split`` is a folder (the imagefolder/audiofolder layout)."""
    return (folder / split).is_dir()


def class_folder_rows(folder: Path, split: str, task: str, column: str) -> list[dict[str, Any]]:
    """Rows ``{column: "split/<label>/<file>", "label": "<label>"}`` of ``folder/split/<label>/``,
    or of the split's ``metadata.csv`` / ``metadata.jsonl`` when it has one (as Hugging Face's
    imagefolder and audiofolder read them: :func:`metadata_rows`).

    Files are sorted by class then name; other suffixes and hidden folders are left out.
    DataError for a split folder without class folders or a class folder without a file of the
    task's kind.
    """
    root = folder / split
    metadata = next((root / n for n in METADATA_FILES if (root / n).is_file()), None)
    if metadata is not None:
        return metadata_rows(metadata, folder, task, column)
    classes = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not classes:
        raise DataError(f"{root} holds no class folders; expected {root}/<label>/<file>")
    suffixes = SUFFIXES[task]
    rows = []
    for class_dir in classes:
        files = sorted(
            p for p in class_dir.iterdir() if p.is_file() and p.suffix.lower() in suffixes
        )
        if not files:
            raise DataError(
                f"class folder {class_dir} holds no {task} files ({', '.join(suffixes)})"
            )
        rows += [{column: str(p.relative_to(folder)), "label": class_dir.name} for p in files]
    return rows


def media_item(value: Any, root: Path | None, task: str, at: str) -> dict[str, Any]:
    """The canonical input of one row: ``{"path": absolute path}`` (plus ``"sampling_rate"`` in
    Hz and ``"seconds"`` for audio), after opening the file's header; DataError naming the file
    and ``at``.

    ``value`` is a path, or a hub Image/Audio cell ``{"bytes", "path"}``: embedded bytes are
    written once to :func:`media_cache` (named by their hash) and read from there.
    """
    if isinstance(value, dict):
        value = (
            _cached(value["bytes"], value.get("path")) if value.get("bytes") else value.get("path")
        )
    if not isinstance(value, str) or not value:
        raise DataError(f"{task} path in {at} must be a file path, but got {value!r:.60}")
    path = Path(value).expanduser()
    if not path.is_absolute() and root is not None:
        path = root / path
    if not path.is_file():
        raise DataError(f"{task} file {str(path)!r} in {at} does not exist")
    if task == "image":
        _check_image(path, at)
        return {PATH_KEY: str(path)}
    rate, seconds = _audio_header(path, at)
    return {PATH_KEY: str(path), RATE_KEY: rate, SECONDS_KEY: seconds}


def media_cache() -> Path:
    """Where embedded hub bytes become files: ``$ASTUNE_MEDIA_CACHE``, else
    ``$XDG_CACHE_HOME/astune/media`` (``~/.cache/astune/media``)."""
    return Path(os.environ.get(MEDIA_CACHE_ENV) or astune_cache() / "media")


def _cached(data: bytes, name: str | None) -> str:
    """The file holding ``data`` in the cache (written on first use), with ``name``'s suffix."""
    suffix = Path(name).suffix if name else ""
    path = media_cache() / f"{hashlib.sha256(data).hexdigest()[:32]}{suffix}"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.part")
        partial.write_bytes(data)
        partial.replace(path)  # atomic: a concurrent reader never sees half a file
    return str(path)


def _check_image(path: Path, at: str) -> None:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:  # reads the header only
            image.size  # noqa: B018 - touching it makes a truncated header fail here
    except (UnidentifiedImageError, OSError) as err:
        reason = " ".join(str(err).split())[:120]
        raise DataError(f"image file {str(path)!r} in {at} cannot be read: {reason}") from None


def _audio_header(path: Path, at: str) -> tuple[int, float]:
    """The clip's sampling rate (Hz) and length (seconds), from its header."""
    import soundfile

    try:
        info = soundfile.info(str(path))
        rate = info.samplerate
    except (RuntimeError, soundfile.LibsndfileError) as err:
        reason = " ".join(str(err).split())[:120]
        raise DataError(
            f"audio file {str(path)!r} in {at} cannot be read (sampling rate unknown): {reason}"
        ) from None
    if not isinstance(rate, int) or rate <= 0:
        raise DataError(
            f"audio file {str(path)!r} in {at} has sampling rate {rate!r}; expected a positive "
            f"integer in Hz"
        )
    return rate, info.frames / rate


def load_images(paths: Sequence[str]) -> list[Any]:
    """The images at ``paths`` as RGB ``PIL.Image`` objects (EXIF orientation applied)."""
    from PIL import Image, ImageOps

    images = []
    for path in paths:
        with Image.open(path) as image:
            images.append(ImageOps.exif_transpose(image).convert("RGB"))
    return images


def load_audio(paths: Sequence[str], rate: int) -> list[Any]:
    """The audio at ``paths`` as mono float32 arrays at ``rate`` Hz (channels averaged;
    other rates resampled with ``scipy.signal.resample_poly``, a polyphase filter)."""
    import soundfile
    from scipy.signal import resample_poly

    out = []
    for path in paths:
        samples, file_rate = soundfile.read(path, dtype="float32", always_2d=True)
        mono = samples.mean(axis=1)
        if file_rate != rate:
            g = gcd(rate, file_rate)
            mono = resample_poly(mono, rate // g, file_rate // g).astype("float32")
        out.append(mono)
    return out


def infer_media_task(folder: Path) -> str:
    """``image`` or ``audio``: the kind of every file under ``folder/train/<label>/``;
    DataError naming a file of each kind when they are mixed, or when there is neither."""
    kinds: dict[str, Path] = {}
    for path in sorted(p for p in (folder / "train").rglob("*") if p.is_file()):
        for task, suffixes in SUFFIXES.items():
            if path.suffix.lower() in suffixes:
                kinds.setdefault(task, path)
    if len(kinds) == 1:
        return next(iter(kinds))
    if kinds:
        found = " and ".join(f"{task} files ({path})" for task, path in sorted(kinds.items()))
        raise DataError(
            f"{folder / 'train'} mixes {found}; keep one kind, or write a dataset.json naming "
            "the task"
        )
    raise DataError(
        f"{folder / 'train'} holds no image ({', '.join(IMAGE_SUFFIXES)}) or audio "
        f"({', '.join(AUDIO_SUFFIXES)}) files; write a dataset.json for other data"
    )


def check_class_labels(folder: Path, labels: dict[str, set[str]]) -> None:
    """DataError naming the split folder and the label when a split has a class folder that
    ``train`` lacks (its label would mean nothing to the model); ``labels``: split -> names."""
    known = labels.get("train", set())
    for split, names in labels.items():
        unknown = sorted(names - known)
        if unknown:
            raise DataError(
                f"{folder / split / unknown[0]} is a class that {folder / 'train'} lacks; every "
                "class of validation and test needs training examples"
            )


def metadata_rows(metadata: Path, folder: Path, task: str, column: str) -> list[dict[str, Any]]:
    """Rows of a split's metadata file: ``file_name`` (relative to the file's folder) names each
    file, and ``label`` its class, else the class folder the file sits in. DataError naming
    the metadata file and the row for a missing column, file or label."""
    from astune.data.files import read_rows

    rows = read_rows(metadata)
    if not rows or "file_name" not in rows[0]:
        raise DataError(f"{metadata} needs a 'file_name' column naming each {task} file")
    out = []
    for number, row in enumerate(rows, 1):
        path = metadata.parent / str(row["file_name"])
        if not path.is_file():
            raise DataError(f"{metadata} row {number}: no file {path}")
        label = row.get("label")
        if label is None and path.parent != metadata.parent:
            label = path.parent.name  # the class folder
        if label is None:
            raise DataError(
                f"{metadata} row {number}: no 'label' column and {path.name} is in no class folder"
            )
        out.append({column: str(path.relative_to(folder)), "label": label})
    return out
