"""Write Operon operations and hooks in Python, compiled to WASI 0.2 components.

Operon runs each guest in a WebAssembly sandbox and talks to it through the
``operon:engine`` WIT contract. componentize-py turns a Python module and the CPython
interpreter into a component; this package wraps the bindings it generates, with the
concepts of the Rust SDK:

- an **operation** is a function ``(Input) -> Output`` marked :func:`operation`;
- a **hook** is a :class:`Hook` subclass marked :func:`hook`, configured with
  :func:`config`, :func:`kubernetes` and :func:`schedule`; :func:`objects` yields every
  object a run is about, whatever its binding type;
- changes to the cluster are :class:`Patch`\\ es, metrics are :class:`Metric`\\ s, logs go
  through :mod:`operon_sdk.log`, and :class:`Error` fails a run with a message;
- the hooks of addon modules read and patch their module's values through
  :mod:`operon_sdk.values`.

Build a guest with ``sdk/python/build.sh guest.py -o guest.wasm`` (it runs
``operon_build.py`` beside this package). The generated bindings exist only inside the build
(or after ``componentize-py bindings``): this package imports them, so it is imported by
the component, not by a plain interpreter.
"""

from . import log, values
from .errors import Error
from .hook import (
    Hook,
    KubeObject,
    allow,
    config,
    deny,
    hook,
    kubernetes,
    objects,
    schedule,
)
from .kubernetes import Patch
from .metrics import Metric, expire_group
from .operation import Input, Output, operation
from .types import (
    BindingContext,
    BindingType,
    HookConfig,
    HookInput,
    HookOutput,
    HookSettings,
    WatchEvent,
)

__all__ = [
    "BindingContext",
    "BindingType",
    "Error",
    "Hook",
    "HookConfig",
    "HookInput",
    "HookOutput",
    "HookSettings",
    "Input",
    "KubeObject",
    "Metric",
    "Output",
    "Patch",
    "WatchEvent",
    "allow",
    "config",
    "deny",
    "expire_group",
    "hook",
    "kubernetes",
    "log",
    "objects",
    "operation",
    "schedule",
    "values",
]
