"""workbench.toml -> dataclasses. Every error names the file and the key.

A project needs no workbench.toml: every field has a default. The file only
overrides what it names:

    [verify]
    fp32_precision = "tf32"      # "ieee" (default) or "tf32": widens fp32 tolerances
    deterministic = false        # true: a second run that differs bit for bit fails
    inplace = false              # true: the kernel may modify its inputs
    timeout_s = 60               # seconds a GPU worker may stay silent (a case hung): see "Time-outs"
    interpret_timeout_s = 300    # the same under the Triton interpreter, which ignores timeout_s
    interpret_max_elements = 4194304   # larger cases are skipped in the interpreter
    require_triton = true        # false: a kernel_fn that launches no Triton kernel may pass
    allow_torch_ops = false      # true, or a list (["torch.add", "torch.sum"]): an output torch computed
                                 # with these functions, no Triton kernel's data in it, may pass
    generated_cases = true       # false: no edge-shape cases derived from CASES
    max_generated_cases = 8      # at most this many generated cases per project
    fixed_params = []            # parameters the generated cases keep as they are (["k"] for a top-k)
    repeat_calls = true          # false: no extra calls on fresh inputs / recycled addresses
    guard_regions = true         # false: inputs and allocations without guard margins (out-of-bounds stores)
    torch_compile = "check"      # on a GPU: kernel_fn under torch.compile(fullgraph=True), reported;
                                 # "require": a failure fails the verdict; false / "off": not run
    cuda_graph = "check"         # on a GPU: kernel_fn captured into a CUDA graph and replayed (as above)
    noncontiguous = "check"      # kernel_fn on transposed / strided inputs, reported (as above; not in the
                                 # live loop)
    storage_offset = "require"   # kernel_fn on inputs that start part-way into their storage: a failure
                                 # fails the verdict ("check": reported only; "off": not run)
    backward = false             # true: a training kernel (as when get_inputs marks requires_grad): every
                                 # floating-point input's gradient verified with the forward (verify/gradients.py)
    value_stress = true          # value-stress cases: inputs x64, x1/1024, +1000, with outliers (false, or a
                                 # list of the inputs to stress: ["x"]) (verify/value_stress.py)
    large_index = true           # on a GPU, in `workbench verify`: one case per dtype whose largest tensor
                                 # passes 2^31 elements (false, or the size parameter to scale: "rows")
                                 # (verify/large_index.py)
    error_factor = 2.0           # an output may be off by this many times the inputs' dtype's own error (torch's,
                                 # or one more rounding of the inputs' and intermediates'), never below the
                                 # dtype's tolerance (verify/error_model.py)
    seed = 1234                  # the seed each case's get_inputs draws from (with the case's index); default:
                                 # a new one for each `workbench verify` or app session, said in the report (a
                                 # failure on one draw is replayed with `--seed N`)

    [bench]
    timeout_s = 600              # a run that benchmarks: see "Time-outs"
    warmup_ms = 200              # GPU time spent calling before each timed series
    rep_ms = 1000                # GPU time per timed series at most (min_samples .. max_samples samples)
    median_within_pct = 0.25     # a series stops before rep_ms once its median is known to within this
                                 # (the 95% interval's half-width, % of the median; 0: always rep_ms)
    cuda_graph_below_us = 20     # shorter calls are timed by CUDA-graph replay
    compare_torch_compile = true # also time torch.compile(reference_fn)
    l2_flush = "read"            # between calls, read 2 x L2 ("write": memset it, as do_bench does)
    live_rep_ms = 100            # the live loop's shorter series (`workbench bench` uses rep_ms)
    live_compare_torch_compile = false   # the live loop skips torch.compile (seconds per save)
    mode = "full"                # a training kernel: "fwd", "bwd" or "full" is timed (default full;
                                 # `workbench bench --mode` overrides it)

    [history]                    # the runs .workbench/ keeps (`workbench history` says how much it holds)
    keep_runs = 500              # the newest runs; older ones go as runs are recorded (0: no limit)
    keep_mb = 200                # and the oldest go while the history takes more (0: no limit); pinned
                                 # runs (`workbench history --pin RUN`, a --baseline run) are never removed

    [tolerance.bfloat16]         # float32, tf32, float16, bfloat16, float8_e4m3fn, float8_e5m2, int*, bool (exact)
    rtol = 2e-2
    atol = 2e-2
    rel_norm = 1e-2

Numbers must be finite and not negative (nan, inf and -1 are refused, naming the key); true and
false are not numbers.

Time-outs. A limit is on how long a worker may go without reporting anything (a case's result, a
stage), so it bounds each case; the worker is killed, the case fails as hung, and the remaining
cases resume in a fresh worker. Which one applies is decided by the worker's mode:
  - under the Triton interpreter (no GPU, or --interpret): verify.interpret_timeout_s, for every
    stage; verify.timeout_s is not used there, even when set;
  - on a GPU, verifying only (`workbench verify`, `pytest --workbench`): verify.timeout_s;
  - on a GPU, a run that also benchmarks (`workbench bench`, the live loop): the larger of
    verify.timeout_s and bench.timeout_s, for the whole run (its verification included).
`--timeout S` on the command line (S > 0) replaces verify.timeout_s and verify.interpret_timeout_s
(not bench.timeout_s). 0 means no limit: `interpret_timeout_s = 0` under the interpreter,
`timeout_s = 0` on a GPU (with a benchmark, bench.timeout_s = 0 as well). A limit is at most
MAX_TIMEOUT_S (one million seconds).
"""

from __future__ import annotations

import difflib
import math
import secrets
import sys
import zlib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib


LIVE_WARMUP_MS = 25.0  # the live loop's warm-up before each series (clocks are up from verification)
# How a compatibility check (torch_compile, cuda_graph, and the layouts: noncontiguous, storage_offset)
# counts: "check" runs it and reports what it found beside the verdict; "require" makes a failure fail the
# verdict; "off" does not run it.
COMPAT_MODES = ("check", "require", "off")
COMPAT_KEYS = ("torch_compile", "cuda_graph", "noncontiguous", "storage_offset")
# The compatibility checks a live run leaves out (verify/compat.py, verify/layouts.py): each compiles anew
# (Dynamo and Inductor, a CUDA graph, new strides), seconds on every save.
LIVE_LOOP_SKIPS = ("torch_compile", "cuda_graph", "noncontiguous")
# The time-outs (seconds; 0 = no limit), by section. Above MAX_TIMEOUT_S a limit is refused: it means no
# limit in practice, and a wait that long overflows the threading module's (threading.TIMEOUT_MAX).
TIMEOUT_KEYS = {"verify": ("timeout_s", "interpret_timeout_s"), "bench": ("timeout_s",)}
MAX_TIMEOUT_S = 1_000_000.0


class ConfigError(Exception):
    """workbench.toml is unreadable or holds a bad key or value."""

    def __init__(self, path: Path | str, key: str, message: str):
        self.path, self.key = str(path), key
        where = f"{path}" + (f" [{key}]" if key else "")
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float
    rel_norm: float  # bound on ||out - ref|| / ||ref||


# The defaults (docs/ARCHITECTURE.md, "What verified means"). rel_norm catches a systematic error hiding under atol in
# small-magnitude outputs (softmax probabilities): a few ulps of the dtype.
DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "float64": Tolerance(rtol=1e-7, atol=1e-7, rel_norm=1e-9),
    "float32": Tolerance(rtol=1e-5, atol=1e-5, rel_norm=1e-5),
    "tf32": Tolerance(rtol=1e-2, atol=1e-2, rel_norm=2e-3),
    "float16": Tolerance(rtol=1e-3, atol=1e-3, rel_norm=2e-3),
    "bfloat16": Tolerance(rtol=1e-2, atol=1e-2, rel_norm=1e-2),
    # 8-bit floats: one unit in the last place relative (3 and 2 mantissa bits: 2^-3, 2^-2), the smallest
    # subnormal absolute (2^-9, 2^-16); the error norm half an ulp
    "float8_e4m3fn": Tolerance(rtol=0.125, atol=2.0 ** -9, rel_norm=0.0625),
    "float8_e5m2": Tolerance(rtol=0.25, atol=2.0 ** -16, rel_norm=0.125),
    # integers and booleans (indices, counts, masks): exact
    **{name: Tolerance(rtol=0.0, atol=0.0, rel_norm=0.0)
       for name in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")},
}
# Other output dtypes torch has: no default (an output in one of them is an error until the project gives its
# tolerance, never a silent float32 one); `[tolerance.<name>]` in workbench.toml accepts them.
# (Complex outputs are not among them: the comparison is of real numbers, so they fail as having no tolerance.)
OTHER_DTYPES = ("float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu")


@dataclass(frozen=True)
class VerifyConfig:
    fp32_precision: str = "ieee"
    deterministic: bool = False
    inplace: bool = False
    timeout_s: float = 60.0
    interpret_timeout_s: float = 300.0
    interpret_max_elements: int = 1 << 22
    require_triton: bool = True
    allow_torch_ops: bool | list[str] = False  # True, or the torch functions allowed ("torch.add", "add")
    generated_cases: bool = True
    max_generated_cases: int = 8
    fixed_params: list[str] = field(default_factory=list)
    repeat_calls: bool = True
    guard_regions: bool = True  # inputs and torch.empty* allocations inside margins checked after each call
    torch_compile: str = "check"  # COMPAT_MODES
    cuda_graph: str = "check"
    noncontiguous: str = "check"  # verify/layouts.py
    storage_offset: str = "require"
    backward: bool = False  # a training kernel whatever get_inputs marks: every float input's gradient verified
    # how many times the inputs' dtype's own error a kernel's may be (verify/error_model.py)
    error_factor: float = 2.0
    # value-stress cases (verify/value_stress.py): True, False, or the names of the inputs to stress
    value_stress: bool | list[str] = True
    # large-index cases (verify/large_index.py): True, False, or the size parameter to scale
    large_index: bool | str = True
    # the seed of the inputs (get_inputs draws from inputs_seed(seed, case index)); None: drawn for each run
    # (run/session.py), said in the report
    seed: int | None = None
    tolerances: dict[str, Tolerance] = field(default_factory=lambda: dict(DEFAULT_TOLERANCES))

    def required_but_not_live(self) -> list[str]:
        """The checks this project requires that a live run leaves out: a live run's verdict may differ from
        `workbench verify`'s when there are any."""
        return [key for key in LIVE_LOOP_SKIPS if getattr(self, key) == "require"]

    @property
    def tf32(self) -> bool:
        """The project says its tl.dot rounds float32 inputs to TF32 (`fp32_precision = "tf32"`)."""
        return self.fp32_precision == "tf32"

    def tolerance_for(self, dtype_name: str) -> Tolerance | None:
        """The tolerance an output of this dtype is held to; None when there is none (the judge says so)."""
        if dtype_name == "float32" and self.tf32:
            dtype_name = "tf32"
        return self.tolerances.get(dtype_name)


BENCH_MODES = ("fwd", "bwd", "full")  # a training kernel's forward, backward, or both (timing/modes.py)
MODE_WORDS = {"fwd": "forward (autograd recording)", "bwd": "backward alone (the forward run once per input set, "
              "untimed)", "full": "forward + backward"}


@dataclass(frozen=True)
class BenchConfig:
    warmup_ms: float = 200.0  # GPU time spent calling before each timed series: boost clocks settle
    rep_ms: float = 1000.0  # GPU time per timed series at most; the sample count follows from the call's length
    # A series stops before rep_ms once its median is known to within this (the half-width of its 95% interval, in
    # % of the median), after at least STABLE_MIN_MS of it: a steady kernel's median is settled long before a
    # second of samples. 0: every series runs rep_ms (timers.SeriesStop).
    median_within_pct: float = 0.25
    min_samples: int = 30
    max_samples: int = 5000
    cuda_graph_below_us: float = 20.0  # shorter calls are timed by CUDA-graph replay, not per-call events
    compare_torch_compile: bool = True
    l2_flush: str = "read"  # "read": clean cold L2, as under ncu; "write": as triton.testing.do_bench
    timeout_s: float = 600.0  # longest quiet spell in a bench run (a cold torch.compile can take minutes)
    live_rep_ms: float = 100.0  # the live loop answers within seconds of a save: a shorter series
    live_compare_torch_compile: bool = False  # torch.compile costs seconds per case and save
    # A training kernel's benchmark mode: "fwd", "bwd" or "full" ("" : full for a training kernel; a forward-only
    # kernel has "fwd" alone). timing/modes.py.
    mode: str = ""

    def for_live_loop(self) -> "BenchConfig":
        """The same method with the live loop's budget: fewer samples, torch.compile only if asked for."""
        return replace(self, warmup_ms=min(self.warmup_ms, LIVE_WARMUP_MS), rep_ms=min(self.rep_ms, self.live_rep_ms),
                       compare_torch_compile=self.compare_torch_compile and self.live_compare_torch_compile)


@dataclass(frozen=True)
class HistoryConfig:
    """How much of the project's run history .workbench/ keeps (project/history.py, `workbench history`)."""

    keep_runs: int = 500  # the newest runs kept; older ones go as runs are recorded (0: no limit)
    keep_mb: float = 200.0  # ... and the oldest go while records and sources take more than this (0: no limit)


@dataclass(frozen=True)
class ProjectConfig:
    verify: VerifyConfig = field(default_factory=VerifyConfig)
    bench: BenchConfig = field(default_factory=BenchConfig)
    history: HistoryConfig = field(default_factory=HistoryConfig)
    extra: dict[str, Any] = field(default_factory=dict)  # sections owned by plugins

    def to_dict(self) -> dict[str, Any]:
        verify = {f.name: getattr(self.verify, f.name) for f in fields(VerifyConfig) if f.name != "tolerances"}
        return {
            "verify": verify,
            "tolerance": {k: vars(v) for k, v in self.verify.tolerances.items()},
            "bench": {f.name: getattr(self.bench, f.name) for f in fields(BenchConfig)},
            "history": {f.name: getattr(self.history, f.name) for f in fields(HistoryConfig)},
            **self.extra,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], path: Path | str = "workbench.toml", strict: bool = False) -> "ProjectConfig":
        """`strict` (a user's workbench.toml, read by load_config): a table or a top-level key that is neither
        the workbench's nor a plugin's (PLUGIN_TABLES) is an error naming the closest known one, not ignored."""
        data = dict(data)
        if strict:
            _refuse_unknown_tables(data, path)
        tol_table = data.pop("tolerance", {})
        verify = _section(VerifyConfig, data.pop("verify", {}), "verify", path)
        if verify.fp32_precision not in ("ieee", "tf32"):
            raise ConfigError(path, "verify.fp32_precision", f"must be 'ieee' or 'tf32', not {verify.fp32_precision!r}")
        tolerances = dict(DEFAULT_TOLERANCES)
        if not isinstance(tol_table, dict):
            raise ConfigError(path, "tolerance", "must be a table of dtypes")
        for dtype_name, values in tol_table.items():
            if dtype_name not in DEFAULT_TOLERANCES and dtype_name not in OTHER_DTYPES:
                known = ", ".join([*DEFAULT_TOLERANCES, *OTHER_DTYPES])
                raise ConfigError(path, f"tolerance.{dtype_name}", f"unknown dtype; known: {known}")
            base = tolerances.get(dtype_name)
            if base is None:  # no default to start from: every bound said
                missing = [k for k in ("rtol", "atol", "rel_norm") if not isinstance(values, dict) or k not in values]
                if missing:
                    raise ConfigError(path, f"tolerance.{dtype_name}", f"{dtype_name} has no default tolerance: give "
                                                                       f"{', '.join(missing)} as well")
                base = Tolerance(rtol=0.0, atol=0.0, rel_norm=0.0)
            tolerances[dtype_name] = _section(Tolerance, values, f"tolerance.{dtype_name}", path, base=base)
        verify = replace(verify, tolerances=tolerances)
        bench = _section(BenchConfig, data.pop("bench", {}), "bench", path)
        if bench.l2_flush not in ("read", "write"):
            raise ConfigError(path, "bench.l2_flush", f"must be 'read' or 'write', not {bench.l2_flush!r}")
        if bench.mode not in ("", *BENCH_MODES):
            raise ConfigError(path, "bench.mode", f"must be one of {', '.join(map(repr, BENCH_MODES))}, "
                                                  f"not {bench.mode!r}")
        if not 0 <= bench.median_within_pct < 100:
            raise ConfigError(path, "bench.median_within_pct", f"must be 0 (every series runs rep_ms) or a "
                                                               f"percentage under 100, got {bench.median_within_pct}")
        if bench.min_samples < 1:
            raise ConfigError(path, "bench.min_samples", f"must be at least 1, got {bench.min_samples}")
        if bench.max_samples < bench.min_samples:
            raise ConfigError(path, "bench.max_samples", f"must be at least min_samples ({bench.min_samples}), "
                                                         f"got {bench.max_samples}")
        history = _section(HistoryConfig, data.pop("history", {}), "history", path)
        for key in ("keep_runs", "keep_mb"):
            if getattr(history, key) < 0:
                raise ConfigError(path, f"history.{key}", f"must be 0 (no limit) or more, got {getattr(history, key)}")
        return cls(verify=verify, bench=bench, history=history, extra=data)


# Tables the workbench's own sections leave to plugins (hookspecs.workbench_register_config_tables): a plugin's
# [ncu] or [cluster]. Filled in the process that reads workbench.toml, as it loads its plugins.
PLUGIN_TABLES: set[str] = set()
OWN_TABLES = ("verify", "tolerance", "bench", "history")


def _refuse_unknown_tables(data: dict[str, Any], path: Path | str) -> None:
    known = [*OWN_TABLES, *sorted(PLUGIN_TABLES)]
    for key, value in data.items():
        if key in known:
            continue
        if not isinstance(value, dict):  # a top-level key: say which section has it
            owners = [name for name, section in (("verify", VerifyConfig), ("bench", BenchConfig),
                                                 ("history", HistoryConfig))
                      if key in {f.name for f in fields(section)}]
            hint = f"; did you mean [{owners[0]}] {key}?" if owners else ""
            raise ConfigError(path, key, f"a key outside any table (tables: [{'], ['.join(known)}]){hint}")
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        hint = f"; did you mean [{close[0]}]?" if close else ""
        raise ConfigError(path, key, f"unknown table [{key}] (known: [{'], ['.join(known)}]){hint}")


# [verify] keys that take true, false or a list of names: what the names are
BOOL_OR_NAMES = {"allow_torch_ops": "torch function names (\"torch.add\", \"torch.nn.functional.softmax\")",
                 "value_stress": "input names (as reference_fn calls them: [\"x\"])"}


def _section(cls: type, values: Any, name: str, path: Path | str, base: Any = None) -> Any:
    if not isinstance(values, dict):
        raise ConfigError(path, name, "must be a table")
    template = base if base is not None else cls()
    known = [f.name for f in fields(cls) if f.name != "tolerances"]
    kwargs = {}
    for key, value in values.items():
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            raise ConfigError(path, f"{name}.{key}", f"unknown key{f' (did you mean {close[0]}?)' if close else ''}; "
                                                     f"known: {', '.join(known)}")
        if cls is VerifyConfig and key in COMPAT_KEYS:
            kwargs[key] = _compat_mode(value, f"{name}.{key}", path)
            continue
        if cls is VerifyConfig and key in BOOL_OR_NAMES:
            if not isinstance(value, bool) and not (isinstance(value, list) and all(isinstance(v, str) and v
                                                                                    for v in value)):
                raise ConfigError(path, f"{name}.{key}", f"expected true, false or a list of {BOOL_OR_NAMES[key]}, "
                                                         f"got {value!r}")
            kwargs[key] = value if isinstance(value, bool) else list(value)
            continue
        if cls is VerifyConfig and key == "large_index":
            if not isinstance(value, bool) and not (isinstance(value, str) and value):
                raise ConfigError(path, f"{name}.{key}", f"expected true, false or the name of a size parameter "
                                                         f"(\"rows\"), got {value!r}")
            kwargs[key] = value
            continue
        if cls is VerifyConfig and key == "seed":
            try:  # None only from to_dict (TOML has no null): drawn for each run
                kwargs[key] = None if value is None else seed_value(value)
            except ValueError as exc:
                raise ConfigError(path, f"{name}.{key}", str(exc)) from None
            continue
        if cls is VerifyConfig and key == "fixed_params":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError(path, f"{name}.{key}", f"expected a list of parameter names, got {value!r}")
            kwargs[key] = list(value)
            continue
        expected = type(getattr(template, key))
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, expected) or (expected is not bool and isinstance(value, bool)):
            raise ConfigError(path, f"{name}.{key}", f"expected {expected.__name__}, got {type(value).__name__} {value!r}")
        if expected in (int, float):
            _check_number(value, key, name, path)
        if cls is VerifyConfig and key == "error_factor" and value < 1:
            raise ConfigError(path, f"{name}.{key}", f"must be at least 1 (torch's own error passes), not {value!r}")
        kwargs[key] = value
    return replace(template, **kwargs)


MAX_SEED = 2 ** 32 - 1


def seed_value(value: Any, from_text: bool = False) -> int:
    """A seed for the inputs (workbench.toml's [verify] seed, the command line's --seed): a whole number from 0 to
    MAX_SEED; on the command line, its digits. Raises ValueError with the reason."""
    if isinstance(value, str) and from_text:
        try:
            value = int(value.strip())
        except ValueError:
            raise ValueError(f"expected a whole number from 0 to {MAX_SEED}, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEED:
        raise ValueError(f"expected a whole number from 0 to {MAX_SEED}, got {value!r}")
    return value


def draw_seed() -> int:
    """A new seed for a run's inputs: short enough to type back (`--seed 482913`)."""
    return secrets.randbelow(1_000_000)


def inputs_seed(seed: int | None, case_index: int) -> int:
    """What torch's generator is seeded with before case `case_index`'s get_inputs: the run's seed and the case
    together, so that a case's inputs are the same whichever worker draws them, and differ between cases."""
    return zlib.crc32(f"inputs:{seed or 0}:{case_index}".encode())


def _check_number(value: float, key: str, section: str, path: Path | str) -> None:
    """Finite, not negative, and a time-out no longer than MAX_TIMEOUT_S (0 is no limit)."""
    where = f"{section}.{key}"
    timeout = key in TIMEOUT_KEYS.get(section, ())
    if not math.isfinite(value):
        hint = " (0 means no limit)" if timeout else ""
        raise ConfigError(path, where, f"must be a finite number, got {value!r}{hint}")
    if value < 0:
        hint = " (0 means no limit)" if timeout else ""
        raise ConfigError(path, where, f"must not be negative, got {value!r}{hint}")
    if timeout and value > MAX_TIMEOUT_S:
        raise ConfigError(path, where, f"must be at most {MAX_TIMEOUT_S:.0f} seconds, got {value!r} "
                                       "(0 means no limit)")


def timeout_argument(text: str) -> float:
    """--timeout S: a number of seconds, finite and above 0 (at most MAX_TIMEOUT_S). Raises ValueError with
    the reason. 0 is refused on the command line: the run takes a --timeout of 0 as not given
    (core/run/session.py), so no limit is `timeout_s = 0` / `interpret_timeout_s = 0` in workbench.toml."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"expected a number of seconds, got {text!r}") from None
    no_limit = "for no limit: timeout_s = 0 and interpret_timeout_s = 0 in workbench.toml"
    if not math.isfinite(value):
        raise ValueError(f"expected a finite number of seconds, got {text!r} ({no_limit})")
    if value <= 0:
        raise ValueError(f"expected a number of seconds above 0, got {text!r} ({no_limit})")
    if value > MAX_TIMEOUT_S:
        raise ValueError(f"expected at most {MAX_TIMEOUT_S:.0f} seconds, got {text!r} ({no_limit})")
    return value


def _compat_mode(value: Any, key: str, path: Path | str) -> str:
    """true and false as the older spelling of "check" and "off"."""
    if isinstance(value, bool):
        return "check" if value else "off"
    if value in COMPAT_MODES:
        return value
    raise ConfigError(path, key, f"must be true, false, \"check\", \"require\" or \"off\", not {value!r}")


def load_config(path: Path) -> ProjectConfig:
    """Read workbench.toml at `path`; a missing file gives the defaults."""
    if not path.exists():
        return ProjectConfig()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(path, "", f"not valid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(path, "", f"cannot be read: {exc}") from None
    return ProjectConfig.from_dict(data, path, strict=True)
