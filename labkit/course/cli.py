"""The `labkit` command: run, doctor, lower, student, verify, gather, list (Lab 00)."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from typing import Any, Iterator
from pathlib import Path

from labkit.course import runner
from labkit.course.profile import FULL_MIN_MEMORY_GB

LABS_DIR_HELP = "read the lab notebooks from this folder (default: the course's labs/)"


def _lowered_labs() -> str:
    """"00, 01, 02, 04 and 05": the labs with functions registered for `labkit lower` (Lab 00)."""
    from labkit.course import lowerables  # noqa: F401 - registering is cheap: factories import lazily
    from labkit.course.registry import REGISTRY

    nums = sorted({e.lab[:2] for e in REGISTRY.values()})
    return ", ".join(nums[:-1]) + f" and {nums[-1]}" if len(nums) > 1 else "".join(nums)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="labkit", description="Accelerator Labs: run labs, check this runtime.")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="execute labs headless with papermill and write report.json/html")
    r.add_argument("labs", nargs="*", help="lab names or numbers (default: every lab), e.g. 00 mfu")
    r.add_argument("--profile", choices=runner.PROFILES, default="auto",
                   help="smoke (small, CPU-friendly), full (accelerator sizes), auto (the default: full on an "
                        f"accelerator with >= {FULL_MIN_MEMORY_GB} GB per device or memory unknown, smoke on a "
                        "CPU or a smaller chip)")
    r.add_argument("--out", default="build/run",
                   help="folder for executed notebooks and the report, not the labs' own (default: %(default)s)")
    r.add_argument("--timeout", type=float, default=runner.DEFAULT_TIMEOUT_S,
                   help="seconds per lab (default: %(default)g)")
    r.add_argument("--labs-dir", type=Path, default=None, help=LABS_DIR_HELP + ", e.g. student copies")
    r.add_argument("--check-mode", choices=("stop", "report"), default=None,
                   help="exercise checks: stop at a wrong answer (default) or report and carry on")
    st = sub.add_parser("student", help="write student copies: solutions replaced by stubs, outputs cleared")
    st.add_argument("labs", nargs="*", help="lab names or numbers (default: every lab)")
    st.add_argument("--out", required=True, help="folder for the student notebooks (not the labs' own folder)")
    st.add_argument("--labs-dir", type=Path, default=None, help=LABS_DIR_HELP)
    sub.add_parser("doctor", help="runtime, chip, versions, known incompatibilities")
    lo = sub.add_parser("lower", help=f"lower the compiled functions registered for Labs {_lowered_labs()} "
                                      "for TPU/CUDA (no hardware needed)")
    lo.add_argument("names", nargs="*", help="registered functions (default: all)")
    lo.add_argument("--platform", default="tpu,cuda", help="comma-separated: cpu, cuda, tpu, rocm")
    ve = sub.add_parser("verify", help="check a Lab 05 bundle (or a .safetensors file): digests, structure, signature")
    ve.add_argument("path", help="a bundle folder (or its bundle.json), or a labkit .safetensors weights file")
    ve.add_argument("--key", default=None,
                    help="Ed25519 public key PEM or HMAC secret file: also require a valid signature")
    for field in ("name", "version"):  # a signature binds no identity: pin which model (and release) this is
        ve.add_argument(f"--{field}", default=None, help=f"require the manifest's {field} to be this (a pin: "
                        "without it any bundle the same key signed passes, e.g. an older release)")
    sub.add_parser("gather", help="merge run reports into one cross-chip page: gather REPORT_OR_DIR... --out DIR")
    ls = sub.add_parser("list", help="list the labs")
    ls.add_argument("--labs-dir", type=Path, default=None, help=LABS_DIR_HELP)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `labkit` console script (Lab 00)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["gather"]:  # its own parser (labkit.course.gather.main): reports, then --out
        from labkit.course.gather import main as gather_main

        return gather_main(argv[1:])
    args = _parser().parse_args(argv)
    if args.command == "list":
        try:
            labs = runner.resolve_labs([], args.labs_dir)
        except (OSError, runner.LabNotFound) as e:  # no labs/ folder, --labs-dir not a folder, or no lab in it
            print(f"labkit list: {e}", file=sys.stderr)
            return 2
        for lab in labs:
            print(lab.stem)
        return 0
    if args.command == "lower":
        return _lower(args.platform, args.names)
    if args.command == "doctor":
        from labkit.runtime import doctor

        d = doctor.diagnose()
        print(doctor.format_report(d))
        return 1 if any(f.level == "error" for f in d["findings"]) else 0
    if args.command == "verify":
        pins = {k: getattr(args, k) for k in ("name", "version") if getattr(args, k) is not None}
        if empty := [k for k, v in pins.items() if not v.strip()]:  # `--name "$MODEL"` with MODEL unset: no pin at all
            print(f"labkit verify: --{empty[0]} is empty: pass the {empty[0]} the manifest must carry, or leave "
                  f"--{empty[0]} out", file=sys.stderr)
            return 2
        return _verify(args.path, args.key, pins or None)
    if args.command == "student":
        return _student(args.labs, args.out, args.labs_dir)
    if args.check_mode:
        from labkit.course.check import MODE_ENV

        os.environ[MODE_ENV] = args.check_mode  # inherited by every lab's kernel
    try:
        with _terminate_cleanly():
            report = runner.run(args.labs, args.profile, args.out, args.timeout, args.labs_dir)
    except (runner.LabNotFound, ValueError, TypeError, OSError) as e:  # bad input, unwritable --out: no traceback
        print(f"labkit run: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM: the lab's processes are gone; say where it stopped
        stop = e if isinstance(e, runner.Interrupted) else runner.Interrupted()
        print(f"labkit run: {stop}", file=sys.stderr)
        return 128 + stop.signum
    failed = [lab["name"] for lab in report["labs"] if lab["status"] != "ok"]
    print(f"report: {Path(args.out) / 'report.html'}  ({len(report['labs']) - len(failed)} ok, {len(failed)} failed)")
    return 1 if failed else 0


@contextlib.contextmanager
def _terminate_cleanly() -> Iterator[None]:
    """SIGINT (Ctrl-C) and SIGTERM (`timeout`, a job scheduler, a closing notebook host) as
    :class:`runner.Interrupted`, so `run_lab`'s cleanup stops papermill's kernel and what the lab
    started: the kernel has a session of its own, so no signal sent to this process group reaches it."""
    signums = (signal.SIGINT, signal.SIGTERM)

    def stop(signum: int, _frame: Any) -> None:
        for s in signums:  # a second Ctrl-C or SIGTERM must not cut the cleanup short
            signal.signal(s, signal.SIG_IGN)
        raise runner.Interrupted(signum)

    try:
        before = {s: signal.signal(s, stop) for s in signums}
    except ValueError:  # not the main thread (labkit run called from a thread): leave signals alone
        yield
        return
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def _verify(path: str, key: str | None, expected: dict[str, str] | None = None) -> int:
    """`labkit verify`: one line, exit 0 for a good bundle or weights file, 1 and the reason otherwise (Lab 05)."""
    from labkit.export import bundle, weights

    p = Path(path)
    try:
        if key is not None and not Path(key).is_file():
            raise bundle.BundleError(f"no key file at {key}")
        if p.suffix == ".safetensors":  # a bare weights file: integrity only, it carries no signature
            if key is not None or expected:
                raise bundle.BundleError(f"{p.name}: a bare weights file carries no signature, name or version; "
                                         "verify its bundle")
            flat, m = weights.read_weights(path)
            c = m["config"]
            print(f"OK {p.name}: GPT {c['n_layer']}x{c['d_model']}, {len(flat)} tensors, "
                  f"content sha256 {m['sha256'][:16]}... matches (integrity only: no signature)")
        else:
            if p.is_file() and p.name != bundle.MANIFEST:  # a .pt/.bin checkpoint says how to convert it
                weights.refuse_pickle(p)
                raise bundle.BundleError(f"{p.name}: not a bundle folder (or its {bundle.MANIFEST}) nor a "
                                         ".safetensors weights file")
            v = bundle.verify(path, key, expected)
            # Digests cannot tell a program exported for another config of the same shapes: deserializing
            # each one checks the config its name carries and the platforms it was lowered for.
            try:
                for name in v.manifest["programs"]:
                    v.program(name)
                progs = f"{len(v.manifest['programs'])} program(s) checked against the config"
            except ImportError as e:  # a host without jax: the digests hold; the programs stay unread
                progs = f"programs not deserialized ({e.name or 'jax'} is not installed here): digests only"
            pin = (f"pinned {', '.join(f'{k} {w!r}' for k, w in expected.items())}" if expected
                   else "name/version not pinned (--name, --version)")
            print(f"{v.summary()}; {progs}; {pin}")
    except (bundle.BundleError, OSError) as e:  # WeightsError is a BundleError: every refusal is one line
        print(f"labkit verify: REFUSED {e}", file=sys.stderr)
        return 1
    return 0


def _student(names: list[str], out: str, labs_dir: Path | None = None) -> int:
    """`labkit student`: write the copies and name each file, or one line and exit 2 (Lab 00)."""
    from labkit.course import student

    try:
        written = student.write_student_copies(runner.resolve_labs(names, labs_dir), out)
    except (runner.LabNotFound, student.StudentCopyError, ImportError, OSError) as e:
        print(f"labkit student: {e}", file=sys.stderr)
        return 2
    for p in written:
        print(f"wrote {p}")
    return 0


def _lower(platform: str, names: list[str]) -> int:
    from labkit.course import lowering

    try:
        results = lowering.lower_all(lowering.parse_platforms(platform), names or None)
    except ValueError as e:
        print(f"labkit lower: {e}", file=sys.stderr)
        return 2
    for r in results:
        status = "ok" if r.ok else "FAILED"
        print(f"{status:>6}  {r.platform:5s} {r.name:28s} {r.error}")
    failed = [r for r in results if not r.ok]
    print(f"{len(results) - len(failed)} lowered, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
