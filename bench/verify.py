"""Benchmark: checkpoint verification (noderig/node/verify_files.py).

    .venv/bin/python bench/verify.py [--quick]

(a) Structure: a 64-shard checkpoint the size of the real Kimi K2.6 (595,177,988,208 bytes)
    as SPARSE files: each shard gets a real header with the real model's tensor layout
    (MLA attention, 384 int4 pack-quantized experts per MoE layer with weight_packed /
    weight_scale / weight_shape, embeddings and lm_head in shard 62, the vision tower in 64;
    ~3,500 tensors per MoE shard, ~225,000 in all), a U8 filler tensor to land each shard
    on the real byte size (domain-facts §3), a real model.safetensors.index.json, then
    ``truncate`` to size. Timed: the verifier in-process (own checks, and own + the
    safetensors library's), and the whole node-side command under the node's ``python3``.
    Goal: well under 1 s.
(b) Content: sha256 throughput of the node-side command (``python3 verify_files.py MANIFEST
    DIR --jobs N --no-record``) against ``xargs -0 -n1 -P N sha256sum`` over the same files,
    in the same run, alternating, best of 3; whole commands both (process start-up
    included). Page cache WARM for both (every file read once before timing); plus one
    cold-cache pair (``echo 3 > /proc/sys/vm/drop_caches`` before each, when writable).
    Shapes of 1 GiB total: 1x1 GiB, 4x256 MiB, 16x64 MiB, 64x16 MiB; and a block-size and
    worker-count sweep for the verifier. Ratio = sha256sum time / verifier time (goal >= 0.9).

Results: a table on stdout and bench/results/verify.json. Temporary files are removed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from noderig.node import script_path  # noqa: E402
from noderig.node import verify_files as vf  # noqa: E402

MiB, GiB = 1 << 20, 1 << 30
SCRIPT = str(script_path("verify_files.py"))
NODE_PYTHON = shutil.which("python3", path="/usr/bin:/bin") or "python3"

# Real shard sizes of moonshotai/Kimi-K2.6 (domain-facts §3).
SHARD_SIZES = [995_001_888] + [9_809_047_464] * 9 + [9_809_050_936] * 51 + [4_697_635_160, 108_556_344, 833_769_904]
assert len(SHARD_SIZES) == 64 and sum(SHARD_SIZES) == 595_177_988_208

H, HEADS, QL, KVL, NOPE, ROPE, VH = 7168, 64, 1536, 512, 128, 64, 128
DENSE, MOE, EXPERTS, VOCAB = 18432, 2048, 384, 163840


# ---------------------------------------------------------------------------------------
# (a) structure


def _attention(p):
    return [
        (p + "input_layernorm.weight", "BF16", [H]),
        (p + "self_attn.q_a_proj.weight", "BF16", [QL, H]),
        (p + "self_attn.q_a_layernorm.weight", "BF16", [QL]),
        (p + "self_attn.q_b_proj.weight", "BF16", [HEADS * (NOPE + ROPE), QL]),
        (p + "self_attn.kv_a_proj_with_mqa.weight", "BF16", [KVL + ROPE, H]),
        (p + "self_attn.kv_a_layernorm.weight", "BF16", [KVL]),
        (p + "self_attn.kv_b_proj.weight", "BF16", [HEADS * (NOPE + VH), KVL]),
        (p + "self_attn.o_proj.weight", "BF16", [H, HEADS * VH]),
        (p + "post_attention_layernorm.weight", "BF16", [H]),
    ]


def _layer(i):
    p = f"language_model.model.layers.{i}."
    out = _attention(p)
    if i == 0:
        return out + [(p + f"mlp.{n}_proj.weight", "BF16", s)
                      for n, s in (("gate", [DENSE, H]), ("up", [DENSE, H]), ("down", [H, DENSE]))]
    out += [(p + "mlp.gate.weight", "BF16", [EXPERTS, H]), (p + "mlp.gate.e_score_correction_bias", "F32", [EXPERTS])]
    out += [(p + f"mlp.shared_experts.{n}_proj.weight", "BF16", s)
            for n, s in (("gate", [MOE, H]), ("up", [MOE, H]), ("down", [H, MOE]))]
    for e in range(EXPERTS):
        for proj, (rows, cols) in (("gate_proj", (MOE, H)), ("up_proj", (MOE, H)), ("down_proj", (H, MOE))):
            q = f"{p}mlp.experts.{e}.{proj}."
            out += [(q + "weight_packed", "I32", [rows, cols // 8]), (q + "weight_scale", "BF16", [rows, cols // 32]),
                    (q + "weight_shape", "I32", [2])]
    return out


def _vision():
    out = [("vision_tower.patch_embed.proj.weight", "BF16", [1152, 3, 2, 14, 14]),
           ("vision_tower.patch_embed.pos_emb.weight", "BF16", [64, 64, 1152])]
    for i in range(27):
        p = f"vision_tower.encoder.blocks.{i}."
        out += [(p + "wqkv.weight", "BF16", [3456, 1152]), (p + "wqkv.bias", "BF16", [3456]),
                (p + "wo.weight", "BF16", [1152, 1152]), (p + "mlp.fc0.weight", "BF16", [4304, 1152]),
                (p + "mlp.fc1.weight", "BF16", [1152, 4304])] + [
                (p + f"norm{k}.{w}", "BF16", [1152]) for k in (0, 1) for w in ("weight", "bias")]
    return out


def _shard_tensors(k):
    """Tensors of shard k (1-based), in the real layout."""
    if k <= 61:
        return _layer(k - 1)
    if k == 62:
        return [("language_model.model.embed_tokens.weight", "BF16", [VOCAB, H]),
                ("language_model.model.norm.weight", "BF16", [H]),
                ("language_model.lm_head.weight", "BF16", [VOCAB, H])]
    if k == 63:
        return [("mm_projector.pre_norm.weight", "BF16", [4608]), ("mm_projector.pre_norm.bias", "BF16", [4608]),
                ("mm_projector.proj.0.weight", "BF16", [4608, 4608]), ("mm_projector.proj.2.weight", "BF16", [H, 4608])]
    return _vision()


def _header(tensors, filler, k):
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name, dtype, shape in tensors + ([(f"bench.filler.{k}", "U8", [filler])] if filler else []):
        n = vf.DTYPE_BITS[dtype] * math.prod(shape) // 8
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    raw = json.dumps(header, separators=(",", ":")).encode()
    return raw + b" " * (-len(raw) % 8), off  # writers pad the header to a multiple of 8


def write_sparse_checkpoint(root: Path) -> dict:
    """64 shards with real headers, each truncated (sparse) to its real size; the index."""
    weight_map, total, tensors_n, header_bytes = {}, 0, 0, 0
    for k, target in enumerate(SHARD_SIZES, 1):
        name = f"model-{k:05d}-of-{64:06d}.safetensors"
        tensors = _shard_tensors(k)
        filler = 0
        while True:  # land on the real size: a U8 filler tensor, or drop trailing tensors when over
            raw, data = _header(tensors, filler, k)
            need = target - 8 - len(raw) - (data - filler)
            if need == filler:
                break
            if need < 0 or (filler == 0 and need < 64):  # over (or too close for a filler entry)
                tensors, filler = tensors[:-1], 0
            else:
                filler = need
        with open(root / name, "wb") as f:
            f.write(len(raw).to_bytes(8, "little") + raw)
            f.truncate(8 + len(raw) + data)
        names = [t[0] for t in tensors] + ([f"bench.filler.{k}"] if filler else [])
        weight_map.update(dict.fromkeys(names, name))
        total += data
        tensors_n += len(names)
        header_bytes += len(raw)
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (root / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    files = list(root.iterdir())
    return {"shards": 64, "tensors": tensors_n, "header_bytes": header_bytes,
            "index_bytes": (root / "model.safetensors.index.json").stat().st_size,
            "shard_bytes": sum(p.stat().st_size for p in files if p.suffix == ".safetensors"),
            "apparent_bytes": sum(p.stat().st_size for p in files),
            "disk_bytes": sum(p.stat().st_blocks * 512 for p in files)}


def bench_structure(repeat: int) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="noderig-bench-verify-"))
    try:
        t0 = time.monotonic()
        shape = write_sparse_checkpoint(tmp)
        shape["build_seconds"] = round(time.monotonic() - t0, 2)
        shape["real_sizes"] = shape["shard_bytes"] == sum(SHARD_SIZES)
        out = {"checkpoint": shape}
        for label, library in (("own checks", False), ("own + safetensors library", True)):
            times = []
            for _ in range(repeat):
                t = time.perf_counter()
                report = vf.verify(str(tmp), None, library=library)
                times.append(time.perf_counter() - t)
                assert report["ok"] and len(report["files"]) == 65, report["index"] or report["files"][:3]
            out[label] = {"median_s": statistics.median(times), "min_s": min(times),
                          "library_check": report["library_check"]}
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            res = subprocess.run([NODE_PYTHON, SCRIPT, "-", str(tmp)], capture_output=True, text=True)
            times.append(time.perf_counter() - t)
            assert res.returncode == 0, res.stdout[-500:] + res.stderr[-500:]
        out["node command (python3, stdlib)"] = {"median_s": statistics.median(times), "min_s": min(times),
                                                 "python": NODE_PYTHON}
        if _can_drop_caches():
            _drop_caches()
            t = time.perf_counter()
            vf.verify(str(tmp), None, library=False)
            out["own checks, cold page cache"] = {"median_s": time.perf_counter() - t, "min_s": None}
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------------------------------
# (b) content


def _can_drop_caches() -> bool:
    return os.access("/proc/sys/vm/drop_caches", os.W_OK)


def _drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def _make_files(root: Path, source: Path, count: int, size: int) -> dict:
    """count files of size bytes cut from source (random bytes), and their manifest."""
    files = []
    with open(source, "rb") as src:
        for i in range(count):
            data = src.read(size)
            rel = f"blob-{i:03d}.bin"
            (root / rel).write_bytes(data)
            files.append({"path": rel, "size": size, "sha256": hashlib.sha256(data).hexdigest()})
        # hashed here once, by hashlib: the expected digests for both tools
    manifest = {"files": files, "total_bytes": count * size}
    (root / "manifest.json").write_text(json.dumps(manifest))
    return manifest


def _warm(root: Path):
    for p in root.glob("*.bin"):
        with open(p, "rb") as f:
            while f.read(8 * MiB):
                pass


def _in_process(root: Path, manifest: dict, jobs: int, block: int) -> float:
    """The sweep: the verifier's hashing in this process (no start-up), one setting at a time."""
    saved, vf.BLOCK = vf.BLOCK, block
    try:
        t = time.perf_counter()
        report = vf.verify(str(root), manifest, jobs=jobs, use_record=False, library=False)
        dt = time.perf_counter() - t
    finally:
        vf.BLOCK = saved
    assert report["ok"], report
    return dt


def _run_verifier(root: Path, jobs: int) -> float:
    cmd = [NODE_PYTHON, SCRIPT, str(root / "manifest.json"), str(root), "--jobs", str(jobs), "--no-record"]
    t = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t
    report = json.loads(res.stdout.strip().splitlines()[-1])
    assert res.returncode == 0 and report["ok"], report
    return dt


def _run_sha256sum(root: Path, jobs: int, manifest: dict) -> float:
    names = "\0".join(f["path"] for f in manifest["files"])
    t = time.perf_counter()
    res = subprocess.run(["xargs", "-0", "-n", "1", "-P", str(jobs), "sha256sum"], input=names, cwd=root,
                         capture_output=True, text=True)
    dt = time.perf_counter() - t
    got = {line.split()[1]: line.split()[0] for line in res.stdout.splitlines()}
    assert res.returncode == 0 and got == {f["path"]: f["sha256"] for f in manifest["files"]}
    return dt


def bench_content(jobs: int, repeat: int, shapes, cold: bool) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="noderig-bench-sha-"))
    out = {"jobs": jobs, "cpus": os.cpu_count(), "cache": "warm (every file read once before timing)",
           "shapes": {}, "sweep": {}}
    try:
        source = tmp / "source"
        total = max(c * s for c, s in shapes)
        with open(source, "wb") as f:
            for _ in range(total // (64 * MiB)):
                f.write(os.urandom(64 * MiB))
        for n, (count, size) in enumerate(shapes):
            d = tmp / f"{count}x{size // MiB}M"
            d.mkdir()
            manifest = _make_files(d, source, count, size)
            _warm(d)
            ours, plain = [], []
            for _ in range(repeat):  # alternate so drift hits both
                ours.append(_run_verifier(d, jobs))
                plain.append(_run_sha256sum(d, jobs, manifest))
            row = {"files": count, "file_bytes": size, "verifier_s": min(ours), "sha256sum_s": min(plain),
                   "verifier_GiBps": manifest["total_bytes"] / GiB / min(ours),
                   "sha256sum_GiBps": manifest["total_bytes"] / GiB / min(plain),
                   "ratio": min(plain) / min(ours)}
            if cold and _can_drop_caches() and n == 1:  # 4 x 256 MiB
                _drop_caches()
                c_ours = _run_verifier(d, jobs)
                _drop_caches()
                c_plain = _run_sha256sum(d, jobs, manifest)
                row["cold"] = {"verifier_s": c_ours, "sha256sum_s": c_plain, "ratio": c_plain / c_ours}
                _warm(d)
            if n == 2:  # 16 x 64 MiB: the sweep, worker count then block size
                for j in (1, 2, 4, 8):
                    out["sweep"][f"jobs={j}"] = manifest["total_bytes"] / GiB / min(
                        _in_process(d, manifest, j, vf.BLOCK) for _ in range(3))
                for b in (64 << 10, 256 << 10, 1 * MiB, 4 * MiB, 16 * MiB):
                    out["sweep"][f"block={b // 1024}KiB"] = manifest["total_bytes"] / GiB / min(
                        _in_process(d, manifest, jobs, b) for _ in range(3))
            out["shapes"][f"{count}x{size // MiB}MiB"] = row
            shutil.rmtree(d)
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller content shapes (256 MiB total), 1 repeat")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="parallel hashers for both tools")
    args = ap.parse_args()
    t0 = time.monotonic()
    shapes = [(1, 1 * GiB), (4, 256 * MiB), (16, 64 * MiB), (64, 16 * MiB)]
    if args.quick:
        shapes = [(c, s // 4) for c, s in shapes]
    results = {"host": {"cpus": os.cpu_count(), "python_node": NODE_PYTHON,
                        "python_node_version": subprocess.run([NODE_PYTHON, "-V"], capture_output=True,
                                                              text=True).stdout.strip(),
                        "sha256sum": subprocess.run(["sha256sum", "--version"], capture_output=True,
                                                    text=True).stdout.splitlines()[0]}}
    results["structure"] = bench_structure(repeat=3 if args.quick else 5)
    results["content"] = bench_content(args.jobs, 1 if args.quick else 3, shapes, cold=True)
    results["seconds"] = round(time.monotonic() - t0, 1)
    results["goals"] = {
        "structure_under_1s": results["structure"]["own + safetensors library"]["median_s"] < 1.0,
        "sha256_ratio_at_least_0.9": all(r["ratio"] >= 0.9 for r in results["content"]["shapes"].values()),
    }

    s = results["structure"]
    c = s["checkpoint"]
    print(f"(a) structure, 64 sparse shards, {c['apparent_bytes'] / 1e9:.1f} GB apparent "
          f"({c['disk_bytes'] / MiB:.0f} MiB on disk), {c['tensors']:,} tensors, "
          f"headers {c['header_bytes'] / MiB:.1f} MiB, index {c['index_bytes'] / MiB:.1f} MiB")
    for k, v in s.items():
        if k != "checkpoint":
            low = f" (min {v['min_s'] * 1000:.0f})" if v["min_s"] else ""
            print(f"    {k:<34} {v['median_s'] * 1000:8.0f} ms{low}")
    print(f"(b) sha256, {results['content']['jobs']} jobs, page cache {results['content']['cache']}")
    print(f"    {'shape':<12} {'verifier':>10} {'sha256sum':>10} {'GiB/s ours':>11} {'GiB/s plain':>12} {'ratio':>6}")
    for k, r in results["content"]["shapes"].items():
        print(f"    {k:<12} {r['verifier_s']:9.2f}s {r['sha256sum_s']:9.2f}s {r['verifier_GiBps']:11.2f} "
              f"{r['sha256sum_GiBps']:12.2f} {r['ratio']:6.2f}")
        if "cold" in r:
            print(f"    {k + ' cold':<12} {r['cold']['verifier_s']:9.2f}s {r['cold']['sha256sum_s']:9.2f}s "
                  f"{'':>11} {'':>12} {r['cold']['ratio']:6.2f}")
    sweep = ", ".join(f"{k} {v:.2f}" for k, v in results["content"]["sweep"].items())
    print(f"    verifier sweep, in-process (3rd shape, GiB/s): {sweep}")
    print(f"goals: {', '.join(f'{k} {v}' for k, v in results['goals'].items())}; total {results['seconds']} s")
    out = ROOT / "bench/results/verify.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
