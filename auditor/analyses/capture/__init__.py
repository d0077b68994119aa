"""Capture and compilation: where a draft step's Python value stops mattering.

A captured CUDA graph replays the kernels recorded at capture: a Python argument of a
replayed call changes nothing unless the graph cache is *keyed* on it. A class compiled
once with its guards dropped bakes a Python ``int`` it indexes with into the trace.
This provider recognises, from what the code does (never from class names):

* **graph wrappers** (:class:`GraphWrapper`) — classes whose call path captures a graph
  (a ``with`` of a capture context such as ``torch.cuda.graph(...)``, a call such as
  ``g.capture_begin()``, or entering a class whose ``__enter__`` does) and which replay
  later; and how their cache key is built: from the forward context only (the batch),
  from the call's arguments, or by a key function handed to the constructor and
  applied to the call's arguments;
* **installations** (:class:`Installation`) — where such a wrapper is built around a
  callable and stored (``drafter.model = Wrapper(drafter.model, ...)``;
  ``self.runner = Wrapper(model, key_fn=key_fn)`` inside an installer method, resolved
  per caller of that method), with the key function actually passed and the branch
  conditions that guard the site (the switch that enables that path);
* **whole-loop captures** (:class:`LoopCapture`) — a method containing a draft loop
  handed to a function that captures it as one graph;
* **compiled classes** (:class:`CompiledClass`) — classes under a compile decorator,
  with the arguments the decorator marks dynamic and its enabling condition;
* and, joining these with the draft loops, **frozen steps** (:class:`FrozenStep`): a
  draft loop hands a per-step value to a layer selection only through a captured region
  whose key does not include it, or through a compiled ``forward`` that does not mark
  it dynamic.

The vocabulary (capture and replay APIs, compile decorators and their argument names)
comes from the configuration (``[tool.mtp-audit]``), with torch's and vLLM's names as
defaults.

One module per concern: ``graphs`` (capture and wrappers), ``installs`` (where wrappers are
built and stored), ``guards`` (switch texts), ``compiled`` (compile decorators, whole-loop
capture), ``frozen`` (frozen steps); ``provider`` holds them.
"""

from .model import CompiledClass, FreezeKind, FrozenStep, GraphWrapper, Installation, KeyKind, LoopCapture
from .provider import CaptureProvider

__all__ = ["CaptureProvider", "CompiledClass", "FreezeKind", "FrozenStep", "GraphWrapper", "Installation", "KeyKind",
           "LoopCapture"]
