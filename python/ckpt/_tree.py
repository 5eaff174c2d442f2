"""State-dict trees <-> the node dicts ckpt._core writes (docs/python.md, "Storage").

A container becomes a group whose attribute ``ckpt.kind`` is dict / intdict (all keys ints) /
list / tuple; its entries are named by key or index. A dict's keys are escaped where they would
collide with the format's own names or with what HDF5 treats specially (escape_key), and
``ckpt.order`` lists its stored names in insertion order; in a dict group without ``ckpt.order``
(written before it existed) the names are the keys as they are, in the file's order. Tensors
become datasets written straight from their memory; bool/int/float/str become typed attributes;
homogeneous lists of int, float or str become array attributes (``ckpt.tuples`` names those that
were tuples); None values are named in ``ckpt.none``, bytes are uint8 datasets named in
``ckpt.bytes``. Anything else (a callable, an arbitrary object) is named in ``ckpt.skipped`` and
kept from the live object on restore. No pickle anywhere.
"""
from __future__ import annotations

import re
import warnings
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import torch

from . import _core, _memory, _shard

# A node dict as ckpt._core takes and gives it (python/ckpt/_core.pyi).
Tree = Dict[str, Any]
# (data pointer, byte length, dtype name, shape)
Ref = Tuple[int, int, str, List[int]]
# A Ref a restore reads into, and whether it is fresh (allocated here, holding nothing live)
Dest = Tuple[int, int, str, List[int], bool]


def _storable_dtypes() -> Dict[torch.dtype, str]:
    """torch's dtypes the format stores, by the format's name for them (ckpt._core.DTYPES, the
    C++ core's table): every one torch has under that name with the same element size; quantized
    ones are not (their bytes mean nothing without the scale and zero point)."""
    out: Dict[torch.dtype, str] = {}
    for name, (size, quantized) in _core.DTYPES.items():
        dtype = getattr(torch, name, None)
        if quantized or not isinstance(dtype, torch.dtype):
            continue
        try:
            with warnings.catch_warnings():  # torch 1.13 calls complex32 experimental
                warnings.simplefilter("ignore")
                if torch.empty(0, dtype=dtype).element_size() != size:
                    continue
        except (RuntimeError, TypeError):  # a dtype this torch cannot allocate
            continue
        out[dtype] = name
    return out


_DTYPES = _storable_dtypes()
_TORCH = {v: k for k, v in _DTYPES.items()}
_INT64 = (-(1 << 63), (1 << 63) - 1)


def tensor_ref(t: torch.Tensor, keep: List[torch.Tensor]) -> Ref:
    """(ptr, nbytes, dtype, shape) of a CPU contiguous copy-free view of t; copies go to keep.
    A CUDA tensor is copied into pinned host memory asynchronously on the current stream: the
    caller runs sync_device_copies() once the whole tree is encoded, before the bytes are read,
    so the copies of every tensor overlap."""
    t = t.detach()
    if t.device.type == "cuda":
        host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)  # torch's caching allocator
        host.copy_(t, non_blocking=True)
        t = host
    elif t.device.type != "cpu":
        t = t.cpu()
    if not t.is_contiguous():
        t = t.contiguous()
    if t.dtype not in _DTYPES:
        raise TypeError(f"dtype {t.dtype} is not storable")
    keep.append(t)
    return (t.data_ptr(), t.numel() * t.element_size(), _DTYPES[t.dtype], list(t.shape))


def cuda_in_use() -> bool:
    """CUDA is available and torch has initialised it (so nothing here initialises it)."""
    initialized: Callable[[], bool] = getattr(torch.cuda, "is_initialized")  # untyped in 1.13
    return torch.cuda.is_available() and initialized()


def sync_device_copies() -> None:
    """Waits for the device→host copies tensor_ref started (no-op without CUDA in use)."""
    if cuda_in_use():
        torch.cuda.synchronize()


def _scalar(v: object) -> bool:
    return isinstance(v, (bool, float, str)) or (isinstance(v, int) and _INT64[0] <= v <= _INT64[1])


def _homogeneous(v: object) -> bool:
    if not v or not isinstance(v, (list, tuple)):
        return False
    for kind in (float, str):
        if all(type(x) is kind for x in v):
            return True
    return all(type(x) is int and _INT64[0] <= x <= _INT64[1] for x in v)


def escape_key(key: str) -> str:
    """The stored name of dict key `key` (a str): the key itself unless it contains "%", "/" or
    NUL, is "" or ".", or begins with "ckpt." (the format's own attribute names). Then "%",
    "/" and NUL become %25, %2F and %00, a leading "c" of "ckpt." becomes %63, "." is %2E and
    "" is "%" (docs/format.md, "Groups the Python package writes")."""
    if (key and key != "." and "%" not in key and "/" not in key and "\0" not in key
            and not key.startswith("ckpt.")):
        return key
    if key == "":
        return "%"
    out = key.replace("%", "%25").replace("/", "%2F").replace("\0", "%00")
    if out.startswith("ckpt."):
        out = "%63" + out[1:]
    return "%2E" if out == "." else out


def unescape_key(name: str) -> str:
    """The dict key stored as `name` by escape_key."""
    if name == "%":
        return ""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), name) if "%" in name else name


_ESCAPE = re.compile("%([0-9A-F]{2})")


def _new_node(kind: str) -> Tree:
    return {"attrs": {"ckpt.kind": kind}, "tensors": {}, "children": {}}


def _view_key(t: torch.Tensor) -> Tuple[Any, ...]:
    # Two entries are one tensor (tied weights) when they are the same view of the same memory.
    return (t.device, t.data_ptr(), t.dtype, tuple(t.shape), tuple(t.stride()))


def encode(value: Any, path: str, keep: List[torch.Tensor], skipped: List[str],
           seen: Optional[Dict[Tuple[Any, ...], str]] = None,
           layout: Optional[_shard.SaveLayout] = None) -> Optional[Tree]:
    """The node dict of container `value`; `skipped` collects key paths not representable.
    A tensor that is the same view of the same memory as one encoded before (a tied embedding
    and output layer) is stored once: the later name gets alias_of = the first one's path, with
    its dtype and shape and no bytes, as the C++ adapter does (docs/format.md). A DTensor goes
    to `layout` (its box tuple is put in once the owners are known: SaveLayout.finish)."""
    seen = {} if seen is None else seen
    items: List[Tuple[str, Any]]
    if isinstance(value, dict):
        keys = list(value.keys())
        if all(type(k) is int for k in keys) and keys:
            node, items = _new_node("intdict"), [(str(k), value[k]) for k in keys]
        elif all(isinstance(k, str) for k in keys):
            node, items = _new_node("dict"), [(escape_key(k), v) for k, v in value.items()]
        else:
            skipped.append(path)
            return None
        if items:
            node["attrs"]["ckpt.order"] = [name for name, _ in items]
    else:
        node = _new_node("tuple" if isinstance(value, tuple) else "list")
        node["attrs"]["ckpt.len"] = len(value)
        items = [(str(i), v) for i, v in enumerate(value)]
    attrs: Dict[str, Any] = node["attrs"]
    lists: Dict[str, List[str]] = {"ckpt.none": [], "ckpt.bytes": [], "ckpt.tuples": [],
                                   "ckpt.skipped": []}
    for name, v in items:
        sub = f"{path}/{name}"
        if isinstance(v, torch.Tensor) and _shard.is_dtensor(v):
            if layout is None:
                raise TypeError(f"{sub}: a DTensor outside a Checkpointer's save")
            if v.dtype not in _DTYPES:
                raise TypeError(f"{sub}: dtype {v.dtype} is not storable")
            layout.add(node, name, sub, v, _DTYPES[v.dtype])
        elif isinstance(v, torch.Tensor):
            key = _view_key(v) if v.numel() > 0 else None
            if key is not None and key in seen:
                node["tensors"][name] = (0, 0, _DTYPES[v.dtype], list(v.shape), seen[key])
            elif (layout is not None and layout.replicas is not None and v.dim() > 0
                  and key is not None and layout.replicas.holds(v)):
                if v.dtype not in _DTYPES:
                    raise TypeError(f"{sub}: dtype {v.dtype} is not storable")
                layout.add_whole(node, name, sub, v, _DTYPES[v.dtype])
                seen[key] = sub
            else:
                node["tensors"][name] = tensor_ref(v, keep)
                if key is not None:
                    seen[key] = sub
        elif v is None:
            lists["ckpt.none"].append(name)
        elif isinstance(v, (bytes, bytearray)):
            node["tensors"][name] = tensor_ref(torch.frombuffer(bytearray(v), dtype=torch.uint8)
                                               if v else torch.empty(0, dtype=torch.uint8), keep)
            lists["ckpt.bytes"].append(name)
        elif _scalar(v):
            attrs[name] = v
        elif _homogeneous(v):
            attrs[name] = list(v)
            if isinstance(v, tuple):
                lists["ckpt.tuples"].append(name)
        elif isinstance(v, (dict, list, tuple)):
            child = encode(v, sub, keep, skipped, seen, layout)
            if child is None:
                lists["ckpt.skipped"].append(name)
            else:
                node["children"][name] = child
        else:
            skipped.append(sub)
            lists["ckpt.skipped"].append(name)
    for k, v in lists.items():
        if v:
            attrs[k] = v
    return node


def encode_component(value: Any, path: str, keep: List[torch.Tensor],
                     skipped: List[str], layout: Optional[_shard.SaveLayout] = None) -> Tree:
    """encode() of a tracked object's whole state: a state that cannot be stored at all (a dict
    whose keys mix types) is refused, naming the component."""
    node = (encode(value, path, keep, skipped, None, layout)
            if isinstance(value, (dict, list, tuple)) else None)
    if node is None:
        from .errors import InvalidArgumentError
        kind = type(value).__name__
        detail = ("its keys are not all str or all int" if isinstance(value, dict)
                  else f"it is a {kind}, not a dict, list or tuple")
        raise InvalidArgumentError(f"{path}: cannot store this state: {detail}")
    return node


def _writable_in_place(t: torch.Tensor, used: Set[int]) -> bool:
    # A live CPU tensor that owns its bytes contiguously and shares them with no other entry.
    if t.device.type != "cpu" or not t.is_contiguous() or t.numel() == 0:
        return False
    key = t.data_ptr()
    if key in used:
        return False
    used.add(key)
    return True


# A live tensor to lay a restored tensor out like (a fresh optimizer's moment: its parameter),
# by the stored path; None when there is none.
Like = Callable[[str], Optional[torch.Tensor]]


def allocate(meta: Tree, path: str, dests: Dict[str, Dest], live: Any,
             in_place: Optional[Set[int]] = None,
             targets: Optional[List[_shard.Target]] = None, like: Optional[Like] = None) -> Tree:
    """A tensor for every dataset of `meta` (ckpt._core.OpenRank(...).tree), recorded in dests, and
    checked against the live tensor at the same key path (`live`, may be None). With `in_place`
    (a set: the data pointers used so far) a live tensor that fits is itself the destination —
    no allocation, read straight into the live object's memory; the others are allocated.
    A box entry (meta["boxes"], a piece of a global tensor) goes to `targets` instead, for
    _core.ShardRead: see _allocate_box."""
    out: Dict[str, Any] = {}  # tensors (DTensors too), or _WholeForShard
    boxes: Dict[str, Any] = meta.get("boxes") or {}
    for name, (dtype, shape, alias_of) in meta["tensors"].items():
        sub = f"{path}/{name}"
        if dtype not in _TORCH:
            raise TypeError(f"{sub}: dtype {dtype} has no torch equivalent")
        if alias_of:  # no bytes of its own (the file records no shape): decode() ties it
            continue
        lv = _get(live, _live_key(meta, name))
        if name in boxes:
            if targets is None:
                raise TypeError(f"{sub}: a box of a sharded tensor outside a restore")
            out[name] = _allocate_box(sub, dtype, boxes[name][0], lv,
                                      like(sub) if like is not None else None, in_place, targets)
            continue
        template = like(sub) if like is not None and lv is None else None
        if template is not None and not (_shard.is_dtensor(template)
                                         and list(template.shape) == list(shape)):
            template = None
        if _shard.is_dtensor(lv) or template is not None:
            # a whole tensor saved, a sharded one live (or a fresh optimizer's moment of a
            # sharded parameter): read it whole, hand over this rank's part
            sharded = lv if template is None else template
            if template is None and (_DTYPES.get(lv.dtype) != dtype
                                     or list(lv.shape) != list(shape)):
                from .errors import MismatchError
                raise MismatchError(f"{sub}: the checkpoint has {dtype}{list(shape)}, the live "
                                    f"object has {_DTYPES.get(lv.dtype, lv.dtype)}{list(lv.shape)}")
            whole = _memory.empty(shape, _TORCH[dtype])
            dests[sub] = (whole.data_ptr(), whole.numel() * whole.element_size(), dtype,
                          list(shape), True)
            out[name] = _WholeForShard(whole, sharded)
            continue
        t, fresh = None, True
        if isinstance(lv, torch.Tensor):
            if _DTYPES.get(lv.dtype) != dtype or list(lv.shape) != list(shape):
                from .errors import MismatchError
                raise MismatchError(f"{sub}: the checkpoint has {dtype}{list(shape)}, the live "
                                    f"object has {_DTYPES.get(lv.dtype, lv.dtype)}{list(lv.shape)}")
            if in_place is not None and _writable_in_place(lv, in_place):
                t, fresh = lv.detach(), False
        if t is None:  # pinned when it goes on to a CUDA tensor: load_state_dict copies it there
            if isinstance(lv, torch.Tensor) and lv.device.type == "cuda":
                t = torch.empty(shape, dtype=_TORCH[dtype], pin_memory=True)
            else:
                t = _memory.empty(shape, _TORCH[dtype])
        dests[sub] = (t.data_ptr(), t.numel() * t.element_size(), dtype, list(shape), fresh)
        out[name] = t
    children = {name: allocate(c, f"{path}/{name}", dests, _get(live, _live_key(meta, name)),
                               in_place, targets, like)
                for name, c in meta["children"].items()}
    return {"tensors": out, "children": children}


class _WholeForShard:
    """A whole tensor read from a checkpoint for a live DTensor (a plain checkpoint restored
    into a sharded model): decode() hands over this rank's part of it, as a DTensor laid out as
    the live one."""

    def __init__(self, whole: torch.Tensor, live: torch.Tensor) -> None:
        self.whole, self.live = whole, live

    def local(self, path: str) -> Any:
        _, offsets, sizes = _shard.live_box(path, self.live)
        part = self.whole
        for d, (o, n) in enumerate(zip(offsets, sizes)):
            part = part.narrow(d, o, n)
        return _shard.from_local(part.contiguous(), self.live)


def _allocate_box(sub: str, dtype: str, global_shape: List[int], lv: Any,
                  template: Optional[torch.Tensor], in_place: Optional[Set[int]],
                  targets: List[_shard.Target]) -> Any:
    """The tensor a saved box's tensor is restored into, with its _core.ShardRead target: the
    live tensor itself (a DTensor's local shard, or a plain tensor of the global shape) where
    it fits and may be written in place; else a new one laid out as the live tensor, or as
    `template` (a fresh optimizer's moment: its parameter), or a plain tensor of the global
    shape. ShardRead reads exactly the elements the target's box covers."""
    from .errors import MismatchError
    torch_dtype = _TORCH[dtype]
    result: Any = None
    local: Optional[torch.Tensor] = None  # result's memory, when it is the live tensor's
    fresh = True  # allocated here: ShardRead fills it while it checks
    if isinstance(lv, torch.Tensor):
        if _DTYPES.get(lv.dtype) != dtype or [int(s) for s in lv.shape] != list(global_shape):
            raise MismatchError(f"{sub}: the checkpoint has {dtype}{list(global_shape)}, the live "
                                f"object has {_DTYPES.get(lv.dtype, lv.dtype)}{list(lv.shape)}")
        live_local = _shard.local_of(lv)
        if in_place is not None and (live_local.numel() == 0
                                     or _writable_in_place(live_local, in_place)):
            result = lv.detach() if not _shard.is_dtensor(lv) else lv
            local, fresh = live_local, False
        elif _shard.is_dtensor(lv):
            result = _shard.from_local(_memory.empty(live_local.shape, torch_dtype), lv)
        else:
            result = _memory.empty(global_shape, torch_dtype)
        box_of = lv
    elif (template is not None and _shard.is_dtensor(template)
          and [int(s) for s in template.shape] == list(global_shape)):
        result = _shard.like_dtensor(template, torch_dtype)
        box_of = template
    else:
        result = _memory.empty(global_shape, torch_dtype)
        box_of = result
    _, offsets, sizes = _shard.live_box(sub, box_of)
    if local is None:
        local = _shard.local_of(result)
    if local.numel() > 0:  # an empty local shard reads nothing
        targets.append((sub, offsets, sizes, local.data_ptr(),
                        local.numel() * local.element_size(), dtype, fresh))
    return result


def _live_key(meta: Tree, name: str) -> str:
    # The live container's key for stored name `name` (escaped where ckpt.order says so).
    return unescape_key(name) if "ckpt.order" in meta["attrs"] else name


def stored_keys(meta: Tree) -> List[str]:
    """The keys of the container `meta` describes, as the live object names them, in stored
    order: what decode() returns the keys of, without reading a byte."""
    attrs: Dict[str, Any] = meta["attrs"]
    names = [n for n in attrs if not n.startswith("ckpt.")]
    for special in ("ckpt.none", "ckpt.skipped"):
        names += attrs.get(special, [])
    names += list(meta["tensors"]) + list(meta["children"])
    return [_live_key(meta, n) for n in _ordered(attrs, names)]


def _ordered(attrs: Dict[str, Any], names: List[str]) -> List[str]:
    order = attrs.get("ckpt.order")
    if order is None:
        return names
    present = set(names)
    listed = [n for n in order if n in present]
    seen = set(listed)
    return listed + [n for n in names if n not in seen]


def _get(live: Any, name: str) -> Any:
    if isinstance(live, dict):
        if name in live:
            return live[name]
        try:
            return live.get(int(name))
        except ValueError:
            return None
    if isinstance(live, (list, tuple)):
        try:
            i = int(name)
        except ValueError:
            return None
        return live[i] if 0 <= i < len(live) else None
    return None


def decode(meta: Tree, tensors: Tree, live: Any, path: str, skipped: List[str],
           root: Optional[Tree] = None) -> Any:
    """The container `meta` describes, tensors from `tensors` (allocate()'s result), skipped
    entries taken from `live`."""
    root = tensors if root is None else root
    attrs: Dict[str, Any] = meta["attrs"]
    kind = attrs.get("ckpt.kind", "dict")
    special = {k: set(attrs.get(k, [])) for k in
               ("ckpt.none", "ckpt.bytes", "ckpt.tuples", "ckpt.skipped")}
    entries: Dict[str, Any] = {}
    for name, v in attrs.items():
        if name.startswith("ckpt."):
            continue
        entries[name] = tuple(v) if name in special["ckpt.tuples"] else v
    for name in special["ckpt.none"]:
        entries[name] = None
    for name, t in tensors["tensors"].items():
        if isinstance(t, _WholeForShard):
            t = t.local(f"{path}/{name}")
        entries[name] = bytes(t.numpy().tobytes()) if name in special["ckpt.bytes"] else t
    alias = {n: a for n, (_, _, a) in meta["tensors"].items() if a}
    for name, target in alias.items():
        entries[name] = _resolve_alias(target, root)
    for name, c in meta["children"].items():
        entries[name] = decode(c, tensors["children"][name], _get(live, _live_key(meta, name)),
                               f"{path}/{name}", skipped, root)
    for name in special["ckpt.skipped"]:
        skipped.append(f"{path}/{name}")
        entries[name] = _get(live, _live_key(meta, name))
    if kind in ("list", "tuple"):
        seq = [entries[str(i)] for i in range(attrs.get("ckpt.len", len(entries)))]
        return tuple(seq) if kind == "tuple" else seq
    names = _ordered(attrs, list(entries))
    if kind == "intdict":
        return {int(k): entries[k] for k in names}
    return {_live_key(meta, k): entries[k] for k in names}


def _resolve_alias(target: str, tensors: Tree) -> torch.Tensor:
    # target is "/component/a/b": walk from the component's root allocation.
    parts = target.strip("/").split("/")[1:]
    node = tensors
    while len(parts) > 1:
        node = node["children"][parts.pop(0)]
    tensor: torch.Tensor = node["tensors"][parts[0]]
    return tensor
