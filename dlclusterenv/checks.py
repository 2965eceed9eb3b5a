"""Type and range checks for numeric constructor and config arguments.

Why not a cast: a wrong type or a NaN must be refused where it is given, naming the argument,
not crash at the first decision or quietly change one; and the value is returned unchanged
(never an int made a float or back), so a valid argument decides bit for bit as before. Why not
pydantic (2.x): a float field converts (an int 1 to 1.0 even in strict mode, a str "1" in lax
mode) and a strict int field refuses numpy integers, which a sweep often passes.
`numbers.Integral` / `numbers.Real` take numpy scalars; bool is an Integral but always refused,
since `True` given for a number is a slip, not a 1.
"""

from __future__ import annotations

import math
import numbers

import numpy as np


def is_int(value) -> bool:
    """An integer (numpy's too), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value, *, inf: bool = False) -> bool:
    """A real number (numpy's too), not a bool, not NaN; infinite only where `inf`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    return not math.isnan(value) and (inf or not math.isinf(value))


def _bounds(gt, ge, lt, le) -> str:
    """The range as words: "> 0", ">= 2", "in (0, 1]"."""
    low, high = (gt if gt is not None else ge), (lt if lt is not None else le)
    if low is not None and high is not None:
        return f"in {'(' if gt is not None else '['}{low}, {high}{')' if lt is not None else ']'}"
    if low is not None:
        return f"{'>' if gt is not None else '>='} {low}"
    return f"{'<' if lt is not None else '<='} {high}" if high is not None else ""


def _in_range(value, gt, ge, lt, le) -> bool:
    return ((gt is None or value > gt) and (ge is None or value >= ge)
            and (lt is None or value < lt) and (le is None or value <= le))


def _fail(owner: str, name: str, what: str, value, note: str) -> ValueError:
    return ValueError(f"{owner}: {name} must be {what}, got {value!r}{f' ({note})' if note else ''}")


def check_int(value, name: str, owner: str, *, gt=None, ge=None, lt=None, le=None, note: str = ""):
    """`value` if it is an int (numpy's too, not a bool) in the range; else a ValueError naming
    `owner` (the class), `name` (the argument) and the value; `note` says what a value means."""
    if not (is_int(value) and _in_range(value, gt, ge, lt, le)):
        raise _fail(owner, name, " ".join(filter(None, ("an int", _bounds(gt, ge, lt, le)))), value, note)
    return value


def check_real(value, name: str, owner: str, *, gt=None, ge=None, lt=None, le=None,
               inf: bool = False, note: str = ""):
    """`value` if it is a real number (an int or float, numpy's too; not a bool, not NaN, finite
    unless `inf`) in the range; else a ValueError as `check_int`'s. Returned as given."""
    if not (is_real(value, inf=inf) and _in_range(value, gt, ge, lt, le)):
        kind = "a number" if inf else "a finite number"
        raise _fail(owner, name, " ".join(filter(None, (kind, _bounds(gt, ge, lt, le)))), value, note)
    return value


def check_bool(value, name: str, owner: str, *, note: str = ""):
    """`value` if it is True or False (numpy's bool too); "no" or 0 would read as a switch."""
    if not isinstance(value, (bool, np.bool_)):
        raise _fail(owner, name, "True or False", value, note)
    return value
