"""What each autotuned kernel tried, timed, pruned, failed and picked.

Two sources, by Triton version:

- the autotuning listener (`triton.knobs.autotuning.listener`, in recent Tritons), called
  after each tuning with fn, key, best_config, configs_timings, duration, cache_hit;
- the Autotuner object itself (`.cache`: key -> picked config; `.configs_timings` and
  `.bench_time`: its last tuning), where the installed Triton has no listener,
  or for a key the listener never heard of (a key pruned to one config is not benchmarked).
  (`.best_config` is only the config of the last launch, whatever its key: not used.)

Both give a failed config as an infinite time without the reason; wrapping the
tuner's `_bench` and `do_bench` while recording catches the exception that made it
infinite, so a config is reported as "out of resources" or "failed to compile". A tuner that keeps
Triton's default timer times with the same one on primitives bound before kernel.py (tuner_timer.py).
Runs in the worker; needs triton, not a GPU.

While verifying, the tuners time with a few runs instead: verification judges every config
forced in turn, so the tuner's pick there only has to be one of them (verify/quick_tuning.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from ..events import AutotuneReport, ConfigTiming
from ..project.contract import describe_config

OUT_OF_RESOURCES = "out of resources"
FAILED_TO_COMPILE = "failed to compile"
PRUNED = "pruned"
UNTIMED = "picked without timing"  # the only config left after pruning


def classify_failure(exc: BaseException) -> str:
    names = {cls.__name__ for cls in type(exc).__mro__}
    return OUT_OF_RESOURCES if "OutOfResources" in names else FAILED_TO_COMPILE


def config_ms(value: Any) -> float | None:
    """A configs_timings value (a float, or [median, p20, p80]) as milliseconds; None when it did not run."""
    if isinstance(value, (list, tuple)):
        value = value[0] if value else None
    try:
        ms = float(value)
    except (TypeError, ValueError):
        return None
    return ms if math.isfinite(ms) else None


def format_key(key: Any, key_names: list[str]) -> str:
    """An autotune key tuple as "M=4096, N=4096, torch.float16"."""
    values = list(key) if isinstance(key, (list, tuple)) else [key]
    named = [f"{name}={value}" for name, value in zip(key_names, values)]
    return ", ".join(named + [str(v) for v in values[len(key_names):]])


def config_timings(all_configs: list[Any], timings: dict[Any, Any], failures: dict[str, str]) -> list[ConfigTiming]:
    """Every config the kernel declares, in order: its time, or why it has none."""
    measured = {describe_config(config): value for config, value in timings.items()}
    rows = []
    for config in all_configs:
        label = describe_config(config)
        if label not in measured:
            rows.append(ConfigTiming(config=label, ms=None, status=PRUNED))
            continue
        ms = config_ms(measured[label])
        status = "ok" if ms is not None else failures.get(label, FAILED_TO_COMPILE)
        rows.append(ConfigTiming(config=label, ms=ms, status=status))
    return rows


@dataclass
class Tuning:
    """One tuning heard from the listener."""

    kernel: str
    key: Any
    best: Any
    timings: dict[Any, Any]
    duration_s: float | None
    cache_hit: bool


@dataclass
class AutotuneRecorder:
    """While active: hears every tuning of the given autotuners and why configs failed.

    Entering clears each tuner's in-memory cache so that every benchmark case tunes
    for itself (the verify stage's last forced config must not stand in for a pick).
    """

    autotuners: dict[str, Any]
    tunings: list[Tuning] = field(default_factory=list)
    failures: dict[str, dict[str, str]] = field(default_factory=dict)  # kernel -> config -> status
    _restore: list[Callable[[], None]] = field(default_factory=list)

    def __enter__(self) -> "AutotuneRecorder":
        self.tunings.clear()
        self.failures.clear()
        for name, tuner in self.autotuners.items():
            tuner.cache.clear()
            self._wrap_bench(name, tuner)
        self._install_listener()
        return self

    def __exit__(self, *exc: Any) -> None:
        while self._restore:
            self._restore.pop()()

    def _install_listener(self) -> None:
        knobs = _autotuning_knobs()
        if knobs is None:
            return
        previous = knobs.listener
        names = {id(_jit_of(tuner)): name for name, tuner in self.autotuners.items()}

        def listener(*, fn: Any, key: Any, best_config: Any, configs_timings: Any, duration: Any,
                     cache_hit: bool, **more: Any) -> None:
            name = names.get(id(fn)) or getattr(fn, "__name__", "") or "?"
            self.tunings.append(Tuning(kernel=name, key=key, best=best_config, timings=dict(configs_timings or {}),
                                       duration_s=duration, cache_hit=bool(cache_hit)))
            if previous is not None:
                previous(fn=fn, key=key, best_config=best_config, configs_timings=configs_timings,
                         duration=duration, cache_hit=cache_hit, **more)

        knobs.listener = listener

        def restore() -> None:
            knobs.listener = previous

        self._restore.append(restore)

    def _wrap_bench(self, name: str, tuner: Any) -> None:
        failures = self.failures.setdefault(name, {})
        current: list[Any] = [None]
        original_bench = tuner._bench
        had_do_bench = "do_bench" in tuner.__dict__
        original_do_bench = tuner.do_bench
        from . import tuner_timer

        # Triton's default timer reads torch.cuda.Event as kernel.py left it: the bound one instead (tuner_timer.py)
        timer = tuner_timer.do_bench if getattr(tuner, "_do_bench", False) is None else original_do_bench

        def bench(*args: Any, config: Any, **meta: Any) -> Any:
            current[0] = config
            return original_bench(*args, config=config, **meta)

        def do_bench(kernel_call: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return timer(kernel_call, *args, **kwargs)
            except Exception as exc:  # the tuner turns some of these into an infinite time
                if current[0] is not None:
                    failures[describe_config(current[0])] = classify_failure(exc)
                raise

        tuner._bench = bench
        tuner.__dict__["do_bench"] = do_bench

        def restore() -> None:
            tuner.__dict__.pop("_bench", None)
            if had_do_bench:
                tuner.__dict__["do_bench"] = original_do_bench
            else:
                tuner.__dict__.pop("do_bench", None)

        self._restore.append(restore)

    def reports(self, case_index: int | None) -> list[AutotuneReport]:
        """What was tuned since entering: the listener's tunings, then what only the objects know."""
        reports = []
        heard: set[tuple[str, str]] = set()
        for tuning in self.tunings:
            tuner = self.autotuners.get(tuning.kernel)
            key_names = list(getattr(tuner, "keys", []) or [])
            all_configs = list(tuner.configs) if tuner is not None else list(tuning.timings)
            key = format_key(tuning.key, key_names)
            heard.add((tuning.kernel, key))
            source = "listener" + (", from Triton's disk cache of tunings" if tuning.cache_hit else "")
            reports.append(AutotuneReport(
                kernel=tuning.kernel, key=key, picked=describe_config(tuning.best),
                timings=config_timings(all_configs, tuning.timings, self.failures.get(tuning.kernel, {})),
                case_index=case_index, tuning_s=tuning.duration_s, source=source))
        for name, tuner in self.autotuners.items():
            reports += self._reports_from_object(name, tuner, case_index, heard)
        return reports

    def _reports_from_object(self, name: str, tuner: Any, case_index: int | None,
                             heard: set[tuple[str, str]]) -> list[AutotuneReport]:
        key_names = list(getattr(tuner, "keys", []) or [])
        all_configs = list(tuner.configs)
        last_timings = dict(getattr(tuner, "configs_timings", None) or {})
        reports = []
        for key, picked in list(tuner.cache.items()):
            label = format_key(key, key_names)
            if (name, label) in heard:
                continue
            picked_label = describe_config(picked)
            # configs_timings holds the last tuning only: it is this key's if its fastest config is
            # this key's pick. A key pruned down to one config was never benchmarked at all.
            if last_timings and describe_config(_fastest(last_timings)) == picked_label:
                rows = config_timings(all_configs, last_timings, self.failures.get(name, {}))
                tuning_s = getattr(tuner, "bench_time", None)
            else:
                rows = [ConfigTiming(config=describe_config(c), ms=None,
                                     status=UNTIMED if describe_config(c) == picked_label else PRUNED)
                        for c in all_configs]
                tuning_s = None
            reports.append(AutotuneReport(kernel=name, key=label, picked=picked_label, timings=rows,
                                          case_index=case_index, tuning_s=tuning_s, source="autotuner object"))
        return reports


def _fastest(timings: dict[Any, Any]) -> Any:
    def sort_key(item: tuple[Any, Any]) -> float:
        ms = config_ms(item[1])
        return ms if ms is not None else math.inf

    return min(timings.items(), key=sort_key)[0] if timings else None


def _jit_of(tuner: Any) -> Any:
    from triton.runtime.jit import JITFunction

    fn = tuner.fn
    for _ in range(4):
        if isinstance(fn, JITFunction):
            return fn
        fn = getattr(fn, "fn", fn)
    return fn


def _autotuning_knobs() -> Any:
    try:
        from triton import knobs
    except ImportError:
        return None
    autotuning = getattr(knobs, "autotuning", None)
    return autotuning if autotuning is not None and hasattr(autotuning, "listener") else None
