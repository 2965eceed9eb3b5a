"""Every baseline's numeric constructor argument is checked at construction: a str, a bool, NaN,
inf or an out-of-range value is a ValueError naming the class, the argument and the value (each
used to be accepted, or to crash later: a raw TypeError at the first decision, an OverflowError).
The values a parameter legitimately takes (inf for Gandiva's pack_util_max, a negative p-norm for
Pollux, None / 0 switches) stay accepted, and a valid value is kept as given (never cast)."""

from __future__ import annotations

import inspect
import math
import re

import numpy as np
import pytest

import baselines
from baselines.drf import DRF
from baselines.fixed import FixedShape, parse
from baselines.gandiva import Gandiva
from baselines.pollux import Pollux
from baselines.srtf import SRTFOracle
from baselines.tetris import Tetris
from baselines.tiresias import Tiresias

CLASSES = {**baselines.REGISTRY, "fixed": FixedShape}
REQUIRED = {"fixed": {"p": 1, "w": 2}}  # the arguments a class has no default for

# A second valid value of each numeric parameter (besides its default). A parameter added to a
# baseline without an entry here fails test_every_numeric_parameter_is_listed.
OTHER_VALID = {
    ("dltap", "weight_of_dltap"): 0,
    ("drf", "max_tasks"): 2,
    ("fixed", "p"): 3,
    ("fixed", "w"): 5,
    ("flowcon", "alpha"): 0.2,
    ("flowcon", "itval"): 5,
    ("flowcon", "beta"): 0.5,
    ("gandiva", "pack_util_max"): 0.8,
    ("gandiva", "grow_max_factor"): 1,
    ("optimus", "interval_s"): 60,
    ("optimus", "early_factor"): 1,
    ("optimus", "early_epochs"): 0,
    ("optimus", "loss_fit_max_points"): 20,
    ("optimus-oracle", "interval_s"): 1e-3,
    ("pollux", "interval_s"): 1,
    ("pollux", "p"): 2.5,
    ("pollux", "restart_delay_s"): 0,
    ("pollux", "population"): 1,
    ("pollux", "generations"): 0,
    ("pollux", "max_growth"): 64.0,
    ("pollux", "max_workers"): 1,
    ("pollux-oracle", "interval_s"): 120.0,
    ("pollux-oracle", "p"): 0.0,
    ("pollux-oracle", "restart_delay_s"): 5,
    ("pollux-oracle", "population"): np.int64(7),
    ("pollux-oracle", "generations"): 3,
    ("pollux-oracle", "max_workers"): 8,
    ("tetris", "fairness"): 0.99,
    ("tetris", "m"): 0,
    ("tiresias", "starve_limit"): 8,
    ("tiresias", "skew_bytes"): 0,
    ("tiresias", "min_history"): 10**6,
    ("tiresias-gittins", "starve_limit"): 2.5,
    ("tiresias-gittins", "skew_bytes"): np.float32(1e8),
    ("tiresias-gittins", "min_history"): 5,
}
INTS = {"max_tasks", "p:fixed", "w", "grow_max_factor", "early_epochs", "loss_fit_max_points",
        "population", "generations", "max_workers", "min_history"}
INF_OK = {("gandiva", "pack_util_max")}  # its default: no bound
NEG_OK = {("pollux", "p"), ("pollux-oracle", "p")}  # a power mean's exponent: any finite real
# pollux-oracle refuses max_growth by design (test_pollux_oracle.py): it has no growth cap
REFUSED_BY_DESIGN = {("pollux-oracle", "max_growth")}


def _signature(cls) -> dict[str, inspect.Parameter]:
    """The constructor's parameters but self; a `**kw` pass-through (PolluxOracle) reads its
    parent's; none where no class but object defines one (K8sDefault)."""
    for klass in cls.__mro__[:-1]:
        if "__init__" in vars(klass):
            params = list(inspect.signature(klass.__init__).parameters.values())[1:]
            if not any(p.kind is p.VAR_KEYWORD for p in params):
                return {p.name: p for p in params}
    return {}


def _numeric(p: inspect.Parameter) -> bool:
    """A number by its default, or by its annotation where the default is None / missing."""
    d = p.default
    if isinstance(d, (int, float)) and not isinstance(d, bool):
        return True
    return (d is None or d is p.empty) and re.search(r"\b(int|float)\b", str(p.annotation)) is not None


def _params() -> list[tuple[str, str]]:
    return [(name, p.name) for name, cls in sorted(CLASSES.items())
            for p in _signature(cls).values() if _numeric(p)
            and (name, p.name) not in REFUSED_BY_DESIGN]


PARAMS = _params()


def _build(name: str, **kw):
    return CLASSES[name](**{**REQUIRED.get(name, {}), **kw})


def _bad_values(name: str, param: str) -> dict[str, object]:
    bad = {"str": "1", "bool": True, "nan": float("nan"), "np-nan": np.float64("nan")}
    if (name, param) not in INF_OK:
        bad |= {"inf": math.inf, "-inf": -math.inf}
    if (name, param) not in NEG_OK:
        bad["neg"] = -1
    if param in INTS or f"{param}:{name}" in INTS:
        bad |= {"fraction": 2.5, "whole float": 2.0}
    return bad


def test_every_numeric_parameter_is_listed():
    assert set(PARAMS) == set(OTHER_VALID)


@pytest.mark.parametrize("name, param, kind, value", [
    (n, p, k, v) for n, p in PARAMS for k, v in _bad_values(n, p).items()
])
def test_bad_value_is_refused_naming_the_parameter(name, param, kind, value):
    cls = CLASSES[name]
    with pytest.raises(ValueError) as e:
        _build(name, **{param: value})
    msg = str(e.value)
    assert f"{param} must be" in msg and repr(value) in msg, msg
    # the class is named (a subclass by its own name, e.g. TiresiasGittins)
    assert msg.startswith(f"{cls.__name__}: "), msg


@pytest.mark.parametrize("name, param", PARAMS)
def test_default_and_another_valid_value_are_kept_as_given(name, param):
    default = _signature(CLASSES[name])[param].default
    if default is not inspect.Parameter.empty:
        _build(name, **{param: default})
    value = OTHER_VALID[name, param]
    sched = _build(name, **{param: value})
    # where the class stores it under the same name, it is the value given, same type
    stored = getattr(sched, param, None)
    if stored is not None and name != "dltap":  # DLTAP keeps weight_of_dltap as a float
        assert stored == value and type(stored) in (type(value), int), (stored, value)


def test_inf_pack_util_max_is_gandiva_s_default_no_bound():
    assert Gandiva().pack_util_max == math.inf
    assert Gandiva(pack_util_max=math.inf).pack_util_max == math.inf
    with pytest.raises(ValueError, match=r"Gandiva: pack_util_max must be a number > 0, got nan"):
        Gandiva(pack_util_max=math.nan)


@pytest.mark.parametrize("p", [-1.0, -4, 0, 0.5, 3])
def test_pollux_p_is_any_finite_power_mean_exponent(p):
    """p < 0 favours the slowest jobs (the default -1), 0 is the geometric mean."""
    assert Pollux(p=p).p is p
    with pytest.raises(ValueError, match=r"Pollux: p must be a finite number, got -inf"):
        Pollux(p=-math.inf)


def test_values_are_returned_unchanged_not_cast():
    """An int stays an int and a numpy scalar stays one: decisions read the value as given."""
    assert type(Tetris(m=1).m) is int
    assert type(Tetris(fairness=np.float32(0.5)).fairness) is np.float32
    assert type(Tiresias(starve_limit=3).starve_limit) is int
    assert Pollux(population=np.int64(4)).population == 4


def test_tiresias_switches_keep_their_off_values():
    assert Tiresias(starve_limit=0).starve_limit == 0  # 0: PromoteKnob off
    assert Tiresias(skew_bytes=None).skew_bytes is None  # None: no job held to consolidation
    with pytest.raises(ValueError, match=r"Tiresias: skew_bytes must be a finite number >= 0, "
                                         r"got inf \(None: no job is held to consolidation\)"):
        Tiresias(skew_bytes=math.inf)
    with pytest.raises(ValueError, match=r"starve_limit must be a finite number >= 0, got inf \(0: off\)"):
        Tiresias(starve_limit=math.inf)


@pytest.mark.parametrize("bad, field", [
    ((3250.0, "7200"), r"thresholds\[1\]"), ((math.nan,), r"thresholds\[0\]"),
    ((3250.0, math.inf), r"thresholds\[1\]"), ((True, 5.0), r"thresholds\[0\]"),
    ((0.0, 5.0), r"thresholds\[0\]"), ("0123", "thresholds must be a list"),
    (3250.0, "thresholds must be a list"), ((7200.0, 3250.0), "thresholds must be in increasing order"),
])
def test_tiresias_thresholds_checked_one_by_one(bad, field):
    """NaN, inf and True were accepted (True as a threshold of 1 GPU-second); a str element, a
    str of digits in order ("0123") or one number was a raw TypeError."""
    with pytest.raises(ValueError, match=rf"^Tiresias: {field}"):
        Tiresias(thresholds=bad)
    assert Tiresias(thresholds=()).thresholds == ()  # one queue: plain LAS without demotion
    assert Tiresias(thresholds=[np.float64(100.0), 200]).thresholds == (100.0, 200.0)


@pytest.mark.parametrize("build, field", [
    (lambda v: DRF(weighted=v), "weighted"), (lambda v: SRTFOracle(preemptive=v), "preemptive"),
    (lambda v: Gandiva(migration=v), "migration"),
])
@pytest.mark.parametrize("bad", ["no", 0, 1, None])
def test_switches_take_a_bool_only(build, field, bad):
    """"no" or 0 used to switch DRF's weighting / SRTF's preemption on or off by truthiness."""
    with pytest.raises(ValueError, match=rf"{field} must be True or False, got {re.escape(repr(bad))}"):
        build(bad)
    build(np.bool_(False))


def test_fixed_shape_p_and_w_are_ints():
    """FixedShape(1.5, 2) was accepted and put a fractional PS count in the decision."""
    with pytest.raises(ValueError, match=r"FixedShape: p must be an int >= 1, got 1.5"):
        FixedShape(1.5, 2)
    with pytest.raises(ValueError, match=r"FixedShape: w must be an int >= 1, got 0"):
        parse("fixed-2x0-spread")
    assert FixedShape(np.int64(2), 3).name == "fixed-2x3-consolidate"


def test_range_words_in_the_message():
    """The message says the range as the check has it, so a user sees which end was crossed."""
    from dlclusterenv.checks import check_int, check_real

    with pytest.raises(ValueError, match=r"^Optimus: early_factor must be a finite number in \(0, 1\], got 1.5$"):
        baselines.make("optimus", early_factor=1.5)
    with pytest.raises(ValueError, match=r"^Tetris: fairness must be a finite number in \[0.0, 1.0\), got 1 "):
        Tetris(fairness=1)
    with pytest.raises(ValueError, match=r"^X: n must be an int <= 3, got 4$"):
        check_int(4, "n", "X", le=3)
    with pytest.raises(ValueError, match=r"^X: v must be a number < 0, got inf$"):
        check_real(math.inf, "v", "X", lt=0, inf=True)
    assert check_real(-math.inf, "v", "X", lt=0, inf=True) == -math.inf


@pytest.mark.parametrize("name", sorted(n for n, c in CLASSES.items() if "placer" in _signature(c)))
@pytest.mark.parametrize("bad", ["nowhere", ["pack"]])
def test_bad_placer_is_a_key_error_listing_the_known(name, bad):
    """A list was a raw TypeError (unhashable); FIFO / FAIR's message left out their own
    "heartbeat"."""
    with pytest.raises(KeyError) as e:
        _build(name, placer=bad)
    msg = str(e.value)
    assert f"unknown placer {bad!r}" in msg and "'spread'" in msg, msg
    assert ("'heartbeat'" in msg) == (_signature(CLASSES[name])["placer"].default == "heartbeat"), msg
