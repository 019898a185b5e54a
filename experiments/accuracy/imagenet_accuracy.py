#!/usr/bin/env python3
"""ImageNet top-1 of timm fp32, the fp16 encoder step and the FP8 step, on the same images.

    STUDY_PYTHON=/path/to/python-with-torch-and-timm \\
    $STUDY_PYTHON experiments/accuracy/imagenet_accuracy.py --val-dir /data/imagenet/val --model vit_b \\
        --build-dir build --out experiments/results/<run>/imagenet_accuracy

Weights: timm's pretrained vit_*_patch16_224 (timm.create_model(..., pretrained=True), so they
must be in the local timm/Hugging Face cache on a machine without network), or --weights FILE,
a timm checkpoint or state dict (.safetensors, .pth, .bin) loaded through timm. Either way the
state dict is exported as F32 safetensors, which every encoder bench loads with --weights.

Images: --val-dir in the ImageFolder layout, DIR/<wnid>/<image files>; the class index of an
image is the position of its folder in the sorted folder names (the ImageNet-1k convention, so
the labels match the model's classes only for the full 1000-folder val set). Files other than
images (by extension: .jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp, any case) and hidden
files are ignored, as torchvision's ImageFolder does; a class folder without any image is an
error. Preprocessing is timm's eval transform done with PIL and numpy (no torchvision): the
shorter side resized to round(S / crop_pct) (crop_pct 0.875 unless --crop-pct) with bicubic
interpolation, an S x S center crop, RGB scaled to [0, 1], normalized with the model's
pretrained_cfg mean/std (ImageNet's when it has none), then rounded to fp16 so that every
forward sees the same input.

--calibration images spread evenly over the sorted list (ImageNet's val set sorts by class, so
they come from across the classes) calibrate the FP8 activation scales and are left out of the
evaluation, so calibration never sees an evaluated image; --limit N keeps the first N of the
others. The evaluated images go through the benches of the fp16 step and the
FP8 step in chunks of --batch (the last chunk smaller), each call with --images (the chunk),
--calibration-images (the same calibration images every time) and --logits-out, and through
timm in fp32 (CUDA when available, else CPU; TF32 off).

Writes into --out: imagenet_accuracy.csv (one row per forward: top-1, top-5, top-1 agreement
with timm fp32 and with the fp16 step), imagenet_accuracy.json (the same with the model,
weights, preprocessing, versions, GPU and every bench command), imagenet_accuracy.txt (a
summary), imagenet_predictions.csv (each evaluated image's label and every forward's top-1)
and encoder_<version>_rows.csv (the benches' own timing rows, one per call). Exit 0 when
everything ran, 1 when a forward failed, 2 on bad use (including an unreadable image).

--reference none skips timm and needs no torch: --weights must then be a study safetensors file
(what this script exports), passed to the benches as it is; mean/std come from its metadata
when it has them. It is meant for tests with fake benches and for machines without torch.
"""
import argparse
import csv
import json
import math
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from studylib.paths import REPO

PROG = "imagenet_accuracy.py"
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
CROP_PCT = 0.875
TOPK = 5
# As export_timm_fixture.TIMM_NAMES: that module imports torch, which --reference none must not need.
TIMM_NAMES = {"vit_ti": "vit_tiny_patch16_224", "vit_s": "vit_small_patch16_224",
              "vit_b": "vit_base_patch16_224", "vit_l": "vit_large_patch16_224"}
CSV_FIELDS = ["forward", "precision", "images", "top1", "top5", "agreement_with_timm_fp32",
              "agreement_with_fp16_step", "nonfinite_images"]
TIMM_FORWARD = "timm fp32"


class UsageError(Exception):
    """Bad arguments or inputs: exit 2."""


class ForwardError(Exception):
    """A forward that did not produce logits: exit 1."""


# ----------------------------------------------------------------------------------------------
# safetensors without torch: F32 (and F16/F64 on reading), little-endian, as the format defines.

_DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8"}


def write_safetensors(tensors, path, metadata=None):
    """tensors: name -> array (written as F32); metadata: str -> str."""
    header, chunks, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name in sorted(tensors):
        data = np.ascontiguousarray(tensors[name], dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(np.shape(tensors[name])),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for c in chunks:
            f.write(c)


def read_safetensors_header(path):
    """(entries, metadata, data_start) without reading the tensors: cheap on a weights file."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            if size < 8 or n <= 0 or 8 + n > size:
                raise ValueError(f"header length {n} does not fit a {size}-byte file")
            header = json.loads(f.read(n))
    except (OSError, ValueError) as e:
        raise UsageError(f"{path}: not a readable safetensors file ({e})") from None
    if not isinstance(header, dict):
        raise UsageError(f"{path}: not a readable safetensors file (header is not an object)")
    metadata = header.pop("__metadata__", None) or {}
    return header, metadata, 8 + n


def read_safetensors(path, names=None):
    """(name -> float32 array, metadata) for the named tensors (all when None)."""
    header, metadata, start = read_safetensors_header(path)
    out = {}
    with open(path, "rb") as f:
        for name in (names if names is not None else header):
            if name not in header:
                raise UsageError(f"{path}: no tensor '{name}'")
            e = header[name]
            if e.get("dtype") not in _DTYPES:
                raise UsageError(f"{path}: tensor '{name}' has dtype {e.get('dtype')}, not one of {sorted(_DTYPES)}")
            begin, end = e["data_offsets"]
            f.seek(start + begin)
            raw = f.read(end - begin)
            dtype = np.dtype(_DTYPES[e["dtype"]])
            if len(raw) != end - begin or len(raw) != dtype.itemsize * math.prod(e["shape"]):
                raise UsageError(f"{path}: tensor '{name}' is truncated or does not match its shape {e['shape']}")
            out[name] = np.frombuffer(raw, dtype=dtype).reshape(e["shape"]).astype(np.float32)
    return out, metadata


# ----------------------------------------------------------------------------------------------
# Images.

def list_images(val_dir):
    """(paths, labels, classes): every image of every class folder, sorted by class then file name."""
    val_dir = Path(val_dir)
    if not val_dir.is_dir():
        raise UsageError(f"{val_dir}: no such directory")
    classes = sorted(d.name for d in val_dir.iterdir() if d.is_dir() and not d.name.startswith("."))
    if not classes:
        raise UsageError(f"{val_dir}: no class folders (expected {val_dir}/<wnid>/<images>; a flat ImageNet "
                         "val folder must first be sorted into one folder per class)")
    paths, labels = [], []
    for label, name in enumerate(classes):
        files = sorted((f for f in (val_dir / name).iterdir()
                        if not f.name.startswith(".") and f.suffix.lower() in IMAGE_EXTENSIONS and f.is_file()),
                       key=lambda f: f.name)
        if not files:
            raise UsageError(f"{val_dir / name}: class folder without images ({' '.join(IMAGE_EXTENSIONS)})")
        paths += files
        labels += [label] * len(files)
    return paths, labels, classes


def preprocess(path, size, mean=IMAGENET_MEAN, std=IMAGENET_STD, crop_pct=CROP_PCT):
    """The image at `path` as the model's input: [3, size, size] float32, every value an fp16 value.
    Resize and crop as torchvision's Resize(int) and CenterCrop on a PIL image (timm's eval transform)."""
    from PIL import Image
    bicubic = getattr(Image, "Resampling", Image).BICUBIC
    short = round(size / crop_pct)
    try:
        with Image.open(path) as im:
            im = im.convert("RGB")
            w, h = im.size
            nw, nh = (short, int(short * h / w)) if w <= h else (int(short * w / h), short)
            im = im.resize((nw, nh), bicubic)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
        raise UsageError(f"cannot read image {path}: {e}") from None
    left, top = int(round((nw - size) / 2.0)), int(round((nh - size) / 2.0))
    im = im.crop((left, top, left + size, top + size))
    x = np.asarray(im, dtype=np.float32) / np.float32(255.0)
    x = (x - np.asarray(mean, dtype=np.float32)) / np.asarray(std, dtype=np.float32)
    return np.ascontiguousarray(x.transpose(2, 0, 1)).astype(np.float16).astype(np.float32)


# ----------------------------------------------------------------------------------------------
# Scores.

def topk_indices(logits, k):
    """[n, min(k, classes)] class indices by descending logit (ties: the lower index first)."""
    logits = np.asarray(logits)
    return np.argsort(-logits, axis=1, kind="stable")[:, :min(k, logits.shape[1])]


def hits(topk, labels, k):
    return (np.asarray(topk)[:, :k] == np.asarray(labels)[:, None]).any(axis=1)


def topk_accuracy(logits, labels, k):
    """Fraction of the images whose label is among their k largest logits."""
    return float(hits(topk_indices(logits, k), labels, k).mean())


# ----------------------------------------------------------------------------------------------
# Benches.

def bench_path(build_dir, version):
    return Path(build_dir) / "stages" / "encoder" / f"encoder_{version}"


def bench_command(bench, model, image_size, batch, weights, images, calibration, logits_out, rows_csv,
                  classes=None):
    cmd = [str(bench), "--model", model, "--image-size", str(image_size), "--batch", str(batch),
           "--weights", str(weights), "--images", str(images), "--calibration-images", str(calibration),
           "--logits-out", str(logits_out), "--no-check", "--warmup", "1", "--iters", "3", "--csv", str(rows_csv)]
    if classes is not None:
        cmd += ["--classes", str(classes)]
    return cmd


def last_row(rows_csv):
    try:
        with open(rows_csv, newline="") as f:
            rows = list(csv.DictReader(f))
    except (OSError, csv.Error):
        return {}
    return rows[-1] if rows else {}


def run_bench(bench, model, image_size, batch, weights, images, calibration, logits_out, rows_csv, classes=None):
    """The bench's logits [batch, classes] for `images`; ForwardError with one line when it has none."""
    cmd = bench_command(bench, model, image_size, batch, weights, images, calibration, logits_out, rows_csv, classes)
    logits_out = Path(logits_out)
    logits_out.unlink(missing_ok=True)  # an earlier chunk's logits must not pass for this one's
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        raise ForwardError(f"{bench}: cannot run ({e})") from None
    said = ((proc.stderr or "").strip() or (proc.stdout or "").strip()).splitlines()[-1:]
    if proc.returncode != 0:
        raise ForwardError(f"{Path(bench).name} exited {proc.returncode}: {said[0] if said else '(no message)'} "
                           f"[{' '.join(cmd)}]")
    if not logits_out.is_file():
        row = last_row(rows_csv)  # a bench that skips the problem (no FP8 on this GPU) says why in its row
        why = f"row {row.get('status')}: {row.get('note')}" if row else (said[0] if said else "no message")
        raise ForwardError(f"{Path(bench).name} wrote no logits ({why}) [{' '.join(cmd)}]")
    try:
        logits = read_safetensors(logits_out, ["logits"])[0]["logits"]
    except UsageError as e:
        raise ForwardError(str(e)) from None
    if logits.ndim != 2 or logits.shape[0] != batch or (classes is not None and logits.shape[1] != classes):
        raise ForwardError(f"{logits_out}: logits of shape {list(logits.shape)}, expected [{batch}, "
                           f"{classes if classes is not None else 'classes'}]")
    return logits


# ----------------------------------------------------------------------------------------------
# timm, imported only here: --reference none runs without torch.

def timm_reference(model_key, image_size, weights):
    """(forward(images) -> logits, state dict, info) of timm's model in fp32."""
    import torch
    import timm
    from reference import export_timm_fixture as fx
    name = fx.TIMM_NAMES[model_key]
    try:
        if weights is not None:
            try:
                m = timm.create_model(name, pretrained=True, img_size=image_size,
                                      pretrained_cfg_overlay=dict(file=str(weights)))
            except TypeError:  # timm < 0.9: no pretrained_cfg_overlay (nor position-embedding resampling)
                m = timm.create_model(name, pretrained=False, img_size=image_size, checkpoint_path=str(weights))
        else:
            m = timm.create_model(name, pretrained=True, img_size=image_size)
    except Exception as e:  # whatever timm, torch or the hub raise for a missing or foreign file
        # A state-dict error names the tensors only on its second and later lines.
        first = " ".join(line.strip() for line in str(e).strip().splitlines()[:3])
        where = str(weights) if weights is not None else "timm's pretrained weights (local cache or network)"
        raise UsageError(f"cannot load {name} from {where}: {type(e).__name__}: {first}"
                         + ("" if weights is not None else "; pass --weights FILE on a machine without them")) from None
    m = m.eval()
    keys, want = set(m.state_dict()), fx.expected_keys(len(m.blocks))
    if keys != want:
        raise UsageError(f"{name}: state dict keys differ from the plain ViT the benches compute: extra "
                         f"{sorted(keys - want)[:5]}, missing {sorted(want - keys)[:5]}")
    cfg = dict(getattr(m, "pretrained_cfg", None) or getattr(m, "default_cfg", None) or {})
    # The reference must be fp32 throughout: TF32 would round its GEMMs and the patch conv to 10 bits.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    m = m.to(dev)

    def forward(images):
        with torch.inference_mode():
            return np.concatenate([m(torch.from_numpy(images[i:i + 64]).to(dev)).float().cpu().numpy()
                                   for i in range(0, len(images), 64)])

    source = str(weights) if weights is not None else \
        f"timm pretrained {name}" + (f".{cfg['tag']}" if cfg.get("tag") else "")
    info = {"timm_name": name, "weights_source": source, "num_classes": int(m.num_classes),
            "mean": [float(v) for v in cfg.get("mean", IMAGENET_MEAN)],
            "std": [float(v) for v in cfg.get("std", IMAGENET_STD)],
            "pretrained_cfg": {k: cfg.get(k) for k in ("hf_hub_id", "tag", "mean", "std", "crop_pct",
                                                       "interpolation", "input_size", "num_classes") if k in cfg},
            "timm": timm.__version__, "torch": torch.__version__, "timm_device": str(dev),
            "timm_gpu": torch.cuda.get_device_name(0) if dev.type == "cuda" else None}
    return forward, m.state_dict(), info


def export_weights(state_dict, path, metadata):
    from reference import export_timm_fixture as fx
    fx.save_safetensors(state_dict, path, metadata)


# ----------------------------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--val-dir", type=Path, required=True, help="ImageFolder layout: DIR/<wnid>/<image files>")
    ap.add_argument("--weights", type=Path, help="a timm checkpoint or state dict (.safetensors, .pth, .bin); "
                    "default timm's pretrained weights from the local cache. With --reference none: a study "
                    "safetensors file, passed to the benches as it is")
    ap.add_argument("--model", default="vit_b", choices=list(TIMM_NAMES))
    ap.add_argument("--image-size", type=int, default=224, help="a positive multiple of 16")
    ap.add_argument("--crop-pct", type=float, default=CROP_PCT, help="center crop over resized shorter side "
                    f"(default {CROP_PCT})")
    ap.add_argument("--limit", type=int, help="evaluate the first N images in sorted order (default all)")
    ap.add_argument("--batch", type=int, default=256, help="images per bench call")
    ap.add_argument("--calibration", type=int, default=32, help="FP8 calibration images: N spread evenly "
                    "over the sorted list, never evaluated")
    ap.add_argument("--fp16-version", default="e6_best", help="the fp16 encoder step")
    ap.add_argument("--fp8-version", default="e12_fp8", help="the FP8 encoder step")
    ap.add_argument("--build-dir", type=Path, default=REPO / "build")
    ap.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1), help="image decoding threads")
    ap.add_argument("--reference", choices=["timm", "none"], default="timm",
                    help="none: skip timm fp32 and report only the study's forwards (no torch needed; "
                    "for testing and offline use; --weights must then be a study safetensors file)")
    ap.add_argument("--out", type=Path, required=True, help="folder for imagenet_accuracy.csv / .json / .txt")
    return ap.parse_args(argv)


def check_args(args):
    if args.image_size <= 0 or args.image_size % 16:
        raise UsageError(f"image size must be a positive multiple of 16, not {args.image_size}")
    if args.batch <= 0 or args.calibration <= 0 or args.workers <= 0 or (args.limit is not None and args.limit <= 0):
        raise UsageError("--batch, --calibration, --workers and --limit must be positive")
    if not 0 < args.crop_pct <= 1:
        raise UsageError(f"--crop-pct must be in (0, 1], not {args.crop_pct}")
    if args.fp16_version == args.fp8_version:
        raise UsageError("--fp16-version and --fp8-version must differ")
    if args.weights is not None and not args.weights.is_file():
        raise UsageError(f"{args.weights}: no such file")
    if args.reference == "none" and args.weights is None:
        raise UsageError("--reference none needs --weights, a study safetensors file")


def pct(v):
    return "-" if v is None else f"{v:.2%}"


def fraction(mask):
    return float(np.mean(mask)) if len(mask) else float("nan")


def main(argv=None):
    try:
        return run(parse_args(argv))
    except UsageError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    except ForwardError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1


def run(args):
    check_args(args)
    paths, labels, classes = list_images(args.val_dir)
    benches = {"fp16": bench_path(args.build_dir, args.fp16_version),
               "fp8": bench_path(args.build_dir, args.fp8_version)}
    for b in benches.values():
        if not (b.is_file() and os.access(b, os.X_OK)):
            raise UsageError(f"{b} not built (ninja -C {args.build_dir})")
    if args.calibration >= len(paths):
        raise UsageError(f"{len(paths)} images in {args.val_dir}: none left to evaluate after {args.calibration} "
                         "calibration images")
    # The middle of N equal slices of the sorted list: distinct while N < len(paths).
    calibration_idx = [(2 * i + 1) * len(paths) // (2 * args.calibration) for i in range(args.calibration)]
    calibration_paths = [paths[i] for i in calibration_idx]
    rest = sorted(set(range(len(paths))) - set(calibration_idx))
    n = len(rest) if args.limit is None else min(args.limit, len(rest))
    eval_paths, eval_labels = [paths[i] for i in rest[:n]], np.asarray([labels[i] for i in rest[:n]])

    args.out.mkdir(parents=True, exist_ok=True)
    work = args.out / "work"
    work.mkdir(exist_ok=True)
    rows_csv = {k: args.out / f"encoder_{v}_rows.csv" for k, v in
                (("fp16", args.fp16_version), ("fp8", args.fp8_version))}
    for p in rows_csv.values():  # the benches append; an earlier run's rows would mix in
        p.unlink(missing_ok=True)

    reference, num_classes = None, None
    if args.reference == "timm":
        print(f"{PROG}: loading timm {TIMM_NAMES[args.model]} ...", flush=True)
        reference, state_dict, info = timm_reference(args.model, args.image_size, args.weights)
        weights = work / "weights.safetensors"
        export_weights(state_dict, weights, {"model": info["timm_name"], "source": info["weights_source"],
                                             "mean": json.dumps(info["mean"]), "std": json.dumps(info["std"])})
        del state_dict
        num_classes = info["num_classes"]
    else:
        weights = args.weights
        header, metadata, _ = read_safetensors_header(weights)
        if "head.weight" in header:
            num_classes = int(header["head.weight"]["shape"][0])
        try:
            mean = [float(v) for v in json.loads(metadata["mean"])] if "mean" in metadata else list(IMAGENET_MEAN)
            std = [float(v) for v in json.loads(metadata["std"])] if "std" in metadata else list(IMAGENET_STD)
        except (ValueError, TypeError) as e:
            raise UsageError(f"{weights}: metadata mean/std unreadable ({e})") from None
        info = {"timm_name": metadata.get("model", TIMM_NAMES[args.model]),
                "weights_source": metadata.get("source", str(weights)), "num_classes": num_classes,
                "mean": mean, "std": std, "timm": None, "torch": None, "timm_device": None, "timm_gpu": None}
    mean, std = info["mean"], info["std"]
    if len(mean) != 3 or len(std) != 3:
        raise UsageError(f"mean {mean} / std {std}: three channels expected")
    if num_classes is not None and len(classes) > num_classes:
        raise UsageError(f"{len(classes)} class folders in {args.val_dir} but the model has {num_classes} classes")
    if num_classes is not None and len(classes) < num_classes:
        print(f"{PROG}: warning: {len(classes)} class folders but {num_classes} classes: a folder's index among "
              f"these {len(classes)} is the model's class only if they are the first {len(classes)} of its classes",
              file=sys.stderr)

    forwards = ([TIMM_FORWARD] if reference else []) + [f"encoder {args.fp16_version}", f"encoder {args.fp8_version}"]
    fp16_name, fp8_name = forwards[-2], forwards[-1]
    topk = {f: [] for f in forwards}
    nonfinite = dict.fromkeys(forwards, 0)
    commands, chunk_sizes = [], []
    chunks = [eval_paths[i:i + args.batch] for i in range(0, n, args.batch)]
    images_path, calibration_path = work / "images.safetensors", work / "calibration.safetensors"
    pool = ThreadPoolExecutor(args.workers)

    def load(chunk):
        return [pool.submit(preprocess, p, args.image_size, mean, std, args.crop_pct) for p in chunk]

    try:
        calibration = np.stack([f.result() for f in load(calibration_paths)])
        write_safetensors({"images": calibration}, calibration_path)
        print(f"{PROG}: {n} images of {len(classes)} classes in {len(chunks)} chunks of up to {args.batch}; "
              f"FP8 calibration on {len(calibration_paths)} images spread over the sorted list", flush=True)
        pending = load(chunks[0])
        done = 0
        for i, chunk in enumerate(chunks):
            x = np.stack([f.result() for f in pending])
            # Decoding the next chunk overlaps this chunk's forwards.
            pending = load(chunks[i + 1]) if i + 1 < len(chunks) else []
            write_safetensors({"images": x}, images_path)
            chunk_sizes.append(len(chunk))
            logits = {}
            if reference:
                logits[TIMM_FORWARD] = reference(x)
            for key, name in (("fp16", fp16_name), ("fp8", fp8_name)):
                out = work / f"logits_{key}.safetensors"
                cmd = bench_command(benches[key], args.model, args.image_size, len(chunk), weights, images_path,
                                    calibration_path, out, rows_csv[key], num_classes)
                commands.append(" ".join(cmd))
                logits[name] = run_bench(benches[key], args.model, args.image_size, len(chunk), weights,
                                         images_path, calibration_path, out, rows_csv[key], num_classes)
            for name, lg in logits.items():
                if lg.shape[1] < len(classes):
                    raise ForwardError(f"{name}: {lg.shape[1]} classes in the logits, {len(classes)} class folders")
                topk[name].append(topk_indices(lg, TOPK))
                nonfinite[name] += int((~np.isfinite(lg).all(axis=1)).sum())
            done += len(chunk)
            so_far = ", ".join(f"{f} {fraction(hits(np.concatenate(topk[f]), eval_labels[:done], 1)):.2%}"
                               for f in forwards)
            print(f"chunk {i + 1}/{len(chunks)}: {done}/{n} images (top-1 so far: {so_far})", flush=True)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)

    topk = {f: np.concatenate(v) for f, v in topk.items()}
    top1 = {f: v[:, 0] for f, v in topk.items()}
    precision = {TIMM_FORWARD: "fp32"}
    for key, name in (("fp16", fp16_name), ("fp8", fp8_name)):
        precision[name] = last_row(rows_csv[key]).get("precision") or ("fp8_e4m3" if key == "fp8" else "fp16")
    rows = []
    for f in forwards:
        rows.append({"forward": f, "precision": precision[f], "images": n,
                     "top1": fraction(hits(topk[f], eval_labels, 1)),
                     "top5": fraction(hits(topk[f], eval_labels, TOPK)),
                     "agreement_with_timm_fp32": fraction(top1[f] == top1[TIMM_FORWARD])
                     if reference and f != TIMM_FORWARD else None,
                     "agreement_with_fp16_step": fraction(top1[f] == top1[fp16_name]) if f != fp16_name else None,
                     "nonfinite_images": nonfinite[f]})

    with open(args.out / "imagenet_accuracy.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS, lineterminator="\n")
        w.writeheader()
        w.writerows([{k: ("" if v is None else v) for k, v in r.items()} for r in rows])
    with open(args.out / "imagenet_predictions.csv", "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["image", "label"] + [f"top1 {fw}" for fw in forwards])
        for j, p in enumerate(eval_paths):
            w.writerow([p.relative_to(args.val_dir).as_posix(), int(eval_labels[j])]
                       + [int(top1[fw][j]) for fw in forwards])

    gpu = last_row(rows_csv["fp16"]).get("gpu") or info["timm_gpu"]
    result = {"model": args.model, "timm_name": info["timm_name"], "weights_source": info["weights_source"],
              "reference": TIMM_FORWARD if reference else None, "image_size": args.image_size,
              "preprocessing": {"resize_shorter_side": round(args.image_size / args.crop_pct),
                                "crop_pct": args.crop_pct, "interpolation": "bicubic (PIL)", "mean": mean, "std": std,
                                "rounded_to": "fp16"},
              "pretrained_cfg": info.get("pretrained_cfg"),
              "val_dir": str(args.val_dir), "classes": len(classes), "model_classes": num_classes,
              "images": n, "images_in_val_dir": len(paths), "limit": args.limit,
              "calibration_images": [p.relative_to(args.val_dir).as_posix() for p in calibration_paths],
              "batch": args.batch, "chunks": chunk_sizes, "topk": min(TOPK, topk[fp16_name].shape[1]),
              "versions": {"fp16": args.fp16_version, "fp8": args.fp8_version},
              "timm": info["timm"], "torch": info["torch"], "timm_device": info["timm_device"], "gpu": gpu,
              "rows": rows, "commands": commands}
    (args.out / "imagenet_accuracy.json").write_text(json.dumps(result, indent=2) + "\n")

    lines = [f"{info['timm_name']} ({info['weights_source']}), {args.image_size} px, {n} images of {len(classes)} "
             f"classes from {args.val_dir}; FP8 calibrated on {len(calibration_paths)} other images from across the list"
             + (f"; timm {info['timm']} fp32 on {info['timm_device']}" if reference else "; timm not run")
             + (f"; benches on {gpu}" if gpu else "") + "."]
    for r in rows:
        lines.append(f"{r['forward']:24s} {r['precision']:9s} top-1 {pct(r['top1'])}  top-5 {pct(r['top5'])}  "
                     f"agreement with timm fp32 {pct(r['agreement_with_timm_fp32'])}, with {fp16_name} "
                     f"{pct(r['agreement_with_fp16_step'])}"
                     + (f"  {r['nonfinite_images']} IMAGES WITH NON-FINITE LOGITS" if r["nonfinite_images"] else ""))
    (args.out / "imagenet_accuracy.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    for f in work.iterdir():  # exported weights and image batches: not for the results folder
        f.unlink()
    work.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
