"""Declarative limits of the engine's parameters: each limit is written once, here or next to
the constructor that owns it, and everything else reads it.

An optimizer lists its parameters' bounds in ``PARAMETERS`` and its constructor checks them
with :func:`check_parameters`; ``fit`` checks its own arguments against :data:`EPOCHS`,
:data:`BATCH_SIZE` and :data:`VALIDATION_SPLIT`. Forms (outside the engine) read the same
objects to build typed fields, so the browser's ``min``/``max``, the server's check and the
engine's error are one rule. Every bound is closed (``min <= value <= max``) on purpose: an
HTML number input can only enforce closed bounds, so a closed bound is one the browser and
the engine can agree on exactly.

Example:

    POPULATION = IntRange(2, MAX_COUNT)
    POPULATION.check("population_size", 1)
    # ParameterError: population_size must be a whole number between 2 and 10000, got 1
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

#: Upper bound on any count the engine is given (examples, candidates, population): it bounds
#: the work (DNS is O(N²) in the population) before any starts.
MAX_COUNT = 10_000


class ParameterError(ValueError):
    """One or more parameters outside their limits; ``errors`` maps each name to a message.

    It is a ``ValueError``, so code that catches those keeps working; callers that report on
    a form read ``errors`` to put each message on its own field.

    Args:
        errors: each parameter's name mapped to what is wrong with its value.
        owner: what the parameters belong to (``"OMEGA"``), put before the message.

    Example:

    ```python
    raise ParameterError({"population_size": "must be at most 64"}, owner="OMEGA")
    ```
    """

    def __init__(self, errors: dict[str, str], owner: str | None = None):
        self.errors = dict(errors)
        text = "; ".join(f"{name} {message}" for name, message in self.errors.items())
        super().__init__(f"{owner}: {text}" if owner else text)


def _number(value: float) -> str:
    return f"{value:g}"


class _Bound:
    """What every bound does with the reason its ``problem`` gives."""

    def problem(self, value: Any) -> str | None:  # pragma: no cover - each bound has its own
        raise NotImplementedError

    def check(self, name: str, value: Any) -> Any:
        """``value`` when allowed; :class:`ParameterError` naming ``name`` otherwise."""
        message = self.problem(value)
        if message:
            raise ParameterError({name: message})
        return value


@dataclass(frozen=True)
class _Range(_Bound):
    """A closed range of numbers of ``types``; the subclasses say which and how to write them."""

    min: float
    max: float | None = None
    help: str = field(default="", compare=False)
    noun: ClassVar[str] = "number"
    types: ClassVar[tuple[type, ...]] = (int, float)

    @staticmethod
    def show(value: float) -> str:
        return _number(value)

    def describe(self) -> str:
        if self.max is None:
            return f"a {self.noun} of at least {self.show(self.min)}"
        return f"a {self.noun} between {self.show(self.min)} and {self.show(self.max)}"

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is refused ("must be ..., got ..."), or None when it is allowed."""
        if (
            isinstance(value, bool)
            or not isinstance(value, self.types)
            or not value >= self.min  # also refuses NaN
            or (self.max is not None and value > self.max)
        ):
            return f"must be {self.describe()}, got {value!r}"
        return None


@dataclass(frozen=True)
class IntRange(_Range):
    """A whole number in ``[min, max]`` (``max=None``: no upper limit).

    Args:
        min: The smallest allowed value.
        max: The largest allowed value, or None.
        help: One line saying what the parameter means (forms show it next to the field).
    """

    min: int
    max: int | None = None
    noun: ClassVar[str] = "whole number"
    types: ClassVar[tuple[type, ...]] = (int,)

    @staticmethod
    def show(value: float) -> str:
        return str(value)

    def narrow(self, max: int) -> IntRange:  # noqa: A002 - the bound's own field name
        """The same bound with a lower ceiling (a server's cap on top of the engine's rule)."""
        return IntRange(self.min, max if self.max is None else min(self.max, max), self.help)


@dataclass(frozen=True)
class FloatRange(_Range):
    """A number (int or float, not bool) in ``[min, max]`` (``max=None``: no upper limit).

    Takes the same arguments as :class:`IntRange` (``min``, ``max``, ``help``).

    Example:
        >>> FloatRange(0.0, 0.95).problem(0.96)
        'must be a number between 0 and 0.95, got 0.96'
    """


@dataclass(frozen=True)
class Choice(_Bound):
    """One of a fixed tuple of values (the first is not implied to be the default).

    Args:
        values: The allowed values.
        help: One line saying what the parameter means (forms show it next to the field).
    """

    values: tuple
    help: str = field(default="", compare=False)

    def describe(self) -> str:
        return f"one of {list(self.values)}"

    def problem(self, value: Any) -> str | None:
        if value not in self.values:
            return f"must be {self.describe()}, got {value!r}"
        return None


Bound = IntRange | FloatRange | Choice


def with_help(bound: Bound, text: str) -> Bound:
    """The same limits with their own help line: one bound shared by several parameters
    (OMEGA's four temperatures) still says what each one is for."""
    return replace(bound, help=text)


@dataclass(frozen=True)
class Flag:
    """A parameter with no limit to check (a switch, a model, free text): only its help.

    Lets ``PARAMETERS`` describe every parameter a constructor offers, bounded or not, so a
    form finds each parameter's help in one place. :func:`check_parameters` skips it.
    """

    help: str = ""

    def problem(self, value: Any) -> str | None:
        return None


def help_text(bounds: dict[str, Any], name: str) -> str:
    """The help line ``bounds[name]`` carries ("" when none)."""
    return getattr(bounds.get(name), "help", "") or ""


def check_parameters(owner: str, bounds: dict[str, Bound], values: dict[str, Any]) -> None:
    """Check every named value against its bound; one :class:`ParameterError` listing them all.

    Args:
        owner: The class name, to start the message (``"OMEGA: ..."``).
        bounds: ``{parameter name: bound}`` (a class's ``PARAMETERS``).
        values: ``{parameter name: value}``; names without a bound are not checked.
    """
    errors = {}
    for name, bound in bounds.items():
        if name in values:
            message = bound.problem(values[name])
            if message:
                errors[name] = message
    if errors:
        raise ParameterError(errors, owner)


def defaults(callable_: Any) -> dict[str, Any]:
    """The default value of each parameter of ``callable_`` (a class: its ``__init__``), so a
    caller that offers the defaults (a form's initial values) never retypes them."""
    return {
        name: parameter.default
        for name, parameter in inspect.signature(callable_).parameters.items()
        if parameter.default is not inspect.Parameter.empty
    }


# --- Program.fit's arguments -----------------------------------------------------------------
#: ``fit(epochs=...)``: at least one pass over the data.
EPOCHS = IntRange(1, help="Passes over the training data; the optimizer proposes after each.")
#: ``fit(batch_size=...)`` (also evaluate/predict).
BATCH_SIZE = IntRange(
    1, help="Examples predicted together; OMEGA makes one new candidate per batch."
)
#: ``fit(validation_split=...)``: the fraction of the training data held out (the last rows).
#: 0 keeps everything for training; at most 0.95, so some training data always remains (a
#: closed bound, so a browser can enforce it too). Whether the split leaves at least one row
#: on each side depends on the data, and fit checks that too.
VALIDATION_SPLIT = FloatRange(
    0.0,
    0.95,
    help="Share of the training rows held out to score candidates (0: score on training rows).",
)
#: ``fit(selection_split=...)`` (an extension of the guide): the fraction of the training data
#: held out from training *and* validation (the last rows, cut before the validation split).
#: After fit, the top validation candidates are scored on it and the best there is the final
#: program, so a candidate that was lucky on a small validation set is not simply kept.
SELECTION_SPLIT = FloatRange(
    0.0,
    0.5,
    help="Share of the training rows held out from training and validation; the final program "
    "is the best on them among the top validation candidates (0: choose on validation).",
)

__all__ = [
    "BATCH_SIZE",
    "EPOCHS",
    "MAX_COUNT",
    "VALIDATION_SPLIT",
    "SELECTION_SPLIT",
    "Choice",
    "Flag",
    "FloatRange",
    "IntRange",
    "ParameterError",
    "check_parameters",
    "defaults",
    "help_text",
    "with_help",
]
