"""What may run a job: an object with ``execute(context)``, or a function taking the context.

Both are called with exactly one argument, the run's context. Whether they can take it is
checked when the catalog is built, so ``execute(self)`` is a catalog problem naming the job, not
a ``TypeError`` at the first run, at 3 a.m.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from jobhost.store import Store

__all__ = ["UsesStore", "bad_executor", "is_executor", "signature_problem"]


@runtime_checkable
class UsesStore(Protocol):
    """An executor of the host's own that works on the store (the run retention job): the host
    that runs it hands it its store, so it purges the store the host was started on, whatever
    the environment says."""

    def use_store(self, store: Store) -> None: ...


def is_executor(executor: object) -> bool:
    """An instance with a callable ``execute``, or a callable that is not a class."""
    # A class has a callable execute too, but calling it unbound would fail at the first run.
    if isinstance(executor, type):
        return False
    return callable(getattr(executor, "execute", None)) or callable(executor)


def signature_problem(executor: object) -> str | None:
    """Why ``executor`` cannot be called with the run's context alone, or None."""
    execute = getattr(executor, "execute", None)
    if callable(execute):
        function = getattr(execute, "__func__", None)
        if function is not None:
            # A method: checked once per class (the bound self is the first argument).
            return _method_problem(function, type(executor).__name__)
        return _problem(execute, f"{type(executor).__name__}.execute", skip_self=False)
    if callable(executor):
        return _problem(executor, _function_name(executor), skip_self=False)
    return None


def bad_executor(executor: object, kind: str) -> str:
    """The message for something that is no executor at all; ``kind`` describes it."""
    if isinstance(executor, type) and callable(getattr(executor, "execute", None)):
        return (
            f"executor is the class {executor.__name__}, not an instance; register "
            f"{executor.__name__}() instead"
        )
    return (
        f"executor {kind} has no callable execute(context), so it does not satisfy "
        "IJobExecutor, and is not a function; pair the declaration with an object whose "
        "execute(context) runs the job, or with a function taking the context"
    )


@functools.lru_cache(maxsize=1024)
def _method_problem(function: Callable[..., Any], owner: str) -> str | None:
    return _problem(function, f"{owner}.execute", skip_self=True)


def _problem(target: Callable[..., Any], name: str, *, skip_self: bool) -> str | None:
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):  # a builtin without a signature: it will tell at run time
        return None
    try:
        if skip_self:
            signature.bind(None, None)
        else:
            signature.bind(None)
    except TypeError:
        shown = signature.replace(return_annotation=inspect.Signature.empty)
        if skip_self:
            fix = "write def execute(self, context: JobContext) -> Result"
        else:
            short = getattr(target, "__name__", None) or "run"
            fix = f"write def {short}(context: JobContext) -> Result"
        return (
            f"executor {name}{shown} cannot be called with the run's context: the host calls it "
            f"with exactly one argument, the context; {fix}"
        )
    return None


def _function_name(function: object) -> str:
    name = getattr(function, "__qualname__", None) or type(function).__name__
    return f"function {name}" if inspect.isfunction(function) else str(name)
