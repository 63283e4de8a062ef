"""The values a numeric setting takes, and the one check of a value against them.

    BATCH = Bounds.integers(1, INT32_MAX)
    BATCH.check('--batch_size', 0, UsageError)   # '--batch_size must be an integer in [1, ...]'

Numbers beyond what the graph stores them in would overflow where they are used (a Python
int past int64 in a tensor, a float past float32's largest in a float32 constant), so the
limits of those types are the widest bounds a setting has.
"""
import dataclasses
import math
import types

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
FLOAT32_MAX = 3.4028234663852886e+38  # The largest finite float32.
# Seconds a setting may name: about 68 years, and still an int64 in milliseconds.
MAX_SECONDS = INT32_MAX


@dataclasses.dataclass(frozen=True)
class Bounds:
    """Numbers from `minimum` to `maximum` (None: no limit on that side), each end included
    unless open_minimum / open_maximum. integer: only ints (not bools); otherwise ints or
    floats, never infinite or NaN."""
    minimum: float | None = None
    maximum: float | None = None
    integer: bool = False
    open_minimum: bool = False
    open_maximum: bool = False

    @classmethod
    def integers(cls, minimum, maximum=None):
        """The ints in [minimum, maximum] (maximum None: every int >= minimum)."""
        return cls(minimum, maximum, integer=True)

    @classmethod
    def numbers(cls, minimum=-FLOAT32_MAX, maximum=FLOAT32_MAX, open_minimum=False,
                open_maximum=False):
        """The finite numbers between minimum and maximum (float32's range by default)."""
        return cls(minimum, maximum, False, open_minimum, open_maximum)

    def __str__(self):
        """'an integer in [1, 64]', 'an integer >= 0', 'a number in (0, 1)'."""
        kind = 'an integer' if self.integer else 'a number'
        if self.maximum is None:
            return f'{kind} {">" if self.open_minimum else ">="} {_number(self.minimum)}'
        return (f'{kind} in {"(" if self.open_minimum else "["}{_number(self.minimum)}, '
                f'{_number(self.maximum)}{")" if self.open_maximum else "]"}')

    def contains(self, value):
        """Whether `value` is one of these numbers."""
        if isinstance(value, bool) or not isinstance(value, int if self.integer else (int, float)):
            return False
        if isinstance(value, float) and not math.isfinite(value):
            return False
        above = value > self.minimum if self.open_minimum else value >= self.minimum
        below = (self.maximum is None or
                 (value < self.maximum if self.open_maximum else value <= self.maximum))
        return above and below

    def check(self, name, value, error=ValueError, none_ok=False):
        """Raises `error` ('NAME must be an integer in [1, 64], got 0') unless `value` is one
        of these numbers, or None with none_ok."""
        if not (value is None and none_ok) and not self.contains(value):
            raise error(f'{name} must be {self}, got {value!r}')


def check_settings(settings, error=ValueError, renamed=None):
    """Raises `error` naming the flag ('--num_clones must be an integer in [1, 64], got 0')
    unless each field of dataclass instance `settings` with Bounds in its metadata's 'bounds'
    holds one of those numbers, or None where its type allows None. Fields are named as their
    flags: --field_name, or --renamed[field_name]."""
    for field in dataclasses.fields(settings):
        bounds = field.metadata.get('bounds')
        if bounds is not None:
            bounds.check(f'--{(renamed or {}).get(field.name, field.name)}',
                         getattr(settings, field.name), error,
                         none_ok=isinstance(field.type, types.UnionType))


def _number(value):
    """`value` as bounds print it: ints whole, floats in 3 significant digits."""
    return str(value) if isinstance(value, int) else f'{value:.3g}'
