"""In-process cost of validating and binding one tools/call's arguments, for echo and plan_trip.

Compares, per call and on the same arguments:

- ``pydantic``: what mcphost does now (``Signature.bind``: the arguments to JSON, one compiled
  TypeAdapter in strict JSON mode, the keyword arguments out);
- ``jsonschema``: the compiled jsonschema validator mcphost keeps for explicit ``input_schema=``
  (validation only, plus the lenient conversion ``Signature.convert``);
- ``before``: mcphost before the switch (commit a6432d5: jsonschema validation plus the hand-written
  converters of the old ``signature.py``), loaded from git when the repository has that commit.

    python benchmarks/bench_validate.py            # about 10 s
    python benchmarks/bench_validate.py --calls 20000 --json
"""

import argparse
import dataclasses
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from typed_tools import PLAN_TRIP_ARGUMENTS, Cabin, echo, plan_trip  # noqa: E402

from mcphost.catalog import compile_validator  # noqa: E402
from mcphost.signature import inspect_signature  # noqa: E402

BEFORE_COMMIT = "a6432d5"


def per_call_us(fn: Any, calls: int, repeats: int) -> float:
    """The best of ``repeats`` timings of ``calls`` calls, in microseconds per call."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, time.perf_counter() - start)
    return best / calls * 1e6


def old_signature_module() -> Any | None:
    try:
        source = subprocess.run(["git", "show", f"{BEFORE_COMMIT}:mcphost/signature.py"], cwd=HERE.parent,
                                capture_output=True, check=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    path = Path(tempfile.mkdtemp(prefix="mcphost-old-sig-")) / "old_signature.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("old_signature", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["old_signature"] = module
    spec.loader.exec_module(module)
    return module


@dataclasses.dataclass
class OldTraveller:
    name: str
    age: int


def old_plan_trip(destination: Annotated[str, "Where to"], nights: int, cabin: Cabin, activities: list[str],
                  traveller: OldTraveller, insured: bool | None = None, budget: float = 1000.0) -> str:
    """plan_trip as the old derivation could take it (it refused pydantic models and dropped Field limits)."""
    return ""


def measure(calls: int, repeats: int) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, float]] = {}
    cases = {"echo": (echo, {"text": "hello"}), "plan_trip": (plan_trip, PLAN_TRIP_ARGUMENTS)}
    old = old_signature_module()
    for name, (fn, arguments) in cases.items():
        sig = inspect_signature(fn)
        validator = compile_validator(sig.input_schema)
        assert sig.bind(arguments)
        row = {
            "pydantic": per_call_us(lambda sig=sig, a=arguments: sig.bind(a), calls, repeats),
            "jsonschema": per_call_us(
                lambda v=validator, a=arguments: sorted(v.iter_errors(a), key=lambda e: list(e.absolute_path)),
                calls, repeats),
        }
        row["jsonschema+convert"] = row["jsonschema"] + per_call_us(
            lambda sig=sig, a=arguments: sig.convert(a), calls, repeats)
        if old is not None:
            old_fn = old_plan_trip if name == "plan_trip" else fn
            old_sig = old.inspect_signature(old_fn)
            old_validator = compile_validator(old_sig.input_schema)
            assert not list(old_validator.iter_errors(arguments))

            def before(v: Any = old_validator, s: Any = old_sig, a: dict[str, Any] = arguments) -> Any:
                errors = sorted(v.iter_errors(a), key=lambda e: list(e.absolute_path))
                return errors or s.bind(a)

            row["before"] = per_call_us(before, calls, repeats)
        results[name] = row
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = measure(args.calls, args.repeats)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"validate + bind per call, best of {args.repeats} x {args.calls} calls (microseconds)")
    columns = ["pydantic", "jsonschema", "jsonschema+convert", "before"]
    print(f"{'tool':<10}" + "".join(f"{c:>20}" for c in columns))
    for name, row in results.items():
        print(f"{name:<10}" + "".join(f"{row[c]:>20.1f}" if c in row else f"{'n/a':>20}" for c in columns))
    if "before" in results["plan_trip"]:
        ratio = results["plan_trip"]["before"] / results["plan_trip"]["pydantic"]
        print(f"plan_trip: {ratio:.1f}x less per call than before")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
