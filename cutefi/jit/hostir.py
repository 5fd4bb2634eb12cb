"""Read the launch geometry out of the DSL's lowered host module for a sample problem.

The DSL's host function fills a launch-config struct
``(array<3 x i32> grid, array<3 x i32> block, i64 smem, ptr stream, ptr attrs, i32 nattrs)``
and an attribute array of ``(i32 id, pad, array<64 x i8> value)`` before calling
``_cudaLaunchKernelEx``. Grid sizes are computed from the host function's arguments, so this
module evaluates the integer arithmetic and control flow of that function with the sample's argument values up
to the launch call. Anything it cannot evaluate stays unknown (or raises, for a branch),
and the contract check then refuses to pass on guesses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

CLUSTER_ATTRIBUTE_ID = 4  # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION

_FUNC = re.compile(r"llvm\.func @([\w$]+)\(([^)]*)\)[^{]*\{")
_ASSIGN = re.compile(r"^(%[\w]+)\s*=\s*llvm\.([\w.]+)\s*(.*)$")
_BLOCK = re.compile(r"^\^(\w+)(?:\(([^)]*)\))?:")
_CONST = re.compile(r"^\(?(-?\d+|true|false)\s*(?::\s*(\w+))?\)?")


@dataclass(frozen=True)
class LaunchGeometry:
    grid: tuple[Any, Any, Any]
    block: tuple[Any, Any, Any]
    smem_bytes: Any
    cluster: tuple[Any, Any, Any]


@dataclass(frozen=True)
class _Ptr:
    base: str
    path: tuple[Any, ...]

    def at(self, indices: tuple[Any, ...]) -> "_Ptr":
        # the first GEP index steps over whole objects; fold it into the last path element
        if not self.path:
            return _Ptr(self.base, indices)
        head = self.path[:-1] + (_add(self.path[-1], indices[0]),)
        return _Ptr(self.base, head + indices[1:])


def _add(a: Any, b: Any) -> Any:
    return a + b if isinstance(a, int) and isinstance(b, int) else None


def _wrap(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _binary(op: str, a: int, b: int, bits: int) -> int | None:
    unsigned = lambda v: v & ((1 << bits) - 1)  # noqa: E731
    if op == "add":
        return _wrap(a + b, bits)
    if op == "sub":
        return _wrap(a - b, bits)
    if op == "mul":
        return _wrap(a * b, bits)
    if op in ("sdiv", "srem"):
        if b == 0:
            return None
        q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
        return q if op == "sdiv" else a - q * b
    if op in ("udiv", "urem"):
        if b == 0:
            return None
        return _wrap(unsigned(a) // unsigned(b) if op == "udiv" else unsigned(a) % unsigned(b), bits)
    if op == "and":
        return _wrap(a & b, bits)
    if op == "or":
        return _wrap(a | b, bits)
    if op == "xor":
        return _wrap(a ^ b, bits)
    if op == "shl":
        return _wrap(a << b, bits)
    if op == "lshr":
        return _wrap(unsigned(a) >> b, bits)
    if op == "ashr":
        return a >> b
    return None


def _icmp(pred: str, a: int, b: int, bits: int) -> int:
    ua, ub = a & ((1 << bits) - 1), b & ((1 << bits) - 1)
    return int({
        "eq": a == b, "ne": a != b, "slt": a < b, "sle": a <= b, "sgt": a > b, "sge": a >= b,
        "ult": ua < ub, "ule": ua <= ub, "ugt": ua > ub, "uge": ua >= ub,
    }[pred])


def _bits(type_text: str) -> int:
    match = re.search(r"\bi(\d+)\b", type_text)
    return int(match.group(1)) if match else 64


def _launching_function(host_ir: str) -> tuple[list[str], list[str]]:
    """(argument names, body lines) of the host function that calls _cudaLaunchKernelEx."""
    lines = host_ir.splitlines()
    for index, line in enumerate(lines):
        match = _FUNC.search(line)
        if not match or match.group(1).startswith("_mlir_ciface"):
            continue
        body, depth = [], line.count("{") - line.count("}")
        for inner in lines[index + 1:]:
            depth += inner.count("{") - inner.count("}")
            if depth <= 0:
                break
            body.append(inner.strip())
        if any("@_cudaLaunchKernelEx" in b for b in body):
            args = re.findall(r"(%arg\d+)\s*:", match.group(2))
            return args, body
    raise ValueError("no host function calling _cudaLaunchKernelEx in the lowered module")


def _split_blocks(body: list[str]) -> dict[str, tuple[list[str], list[str]]]:
    """Basic blocks: name -> (argument names, lines); the entry block is named ''."""
    blocks: dict[str, tuple[list[str], list[str]]] = {"": ([], [])}
    current = ""
    for line in body:
        label = _BLOCK.match(line)
        if label:
            current = label.group(1)
            blocks[current] = (re.findall(r"(%\w+)\s*:", label.group(2) or ""), [])
        else:
            blocks[current][1].append(line)
    return blocks


def _branch_targets(line: str) -> list[tuple[str, list[str]]]:
    targets = []
    for name, operands in re.findall(r"\^(\w+)(?:\(([^)]*)\))?", line):
        names = operands.split(":")[0] if operands else ""
        targets.append((name, [o.strip() for o in names.split(",") if o.strip()]))
    return targets


def evaluate_launch(host_ir: str, arg_values: Sequence[Any], max_steps: int = 200_000) -> LaunchGeometry:
    """Run the host function up to its launch call and read the launch geometry it set up.

    Control flow is followed for real (the DSL's attribute bookkeeping has loops); a branch
    on a value this evaluator cannot compute raises ``ValueError``.
    """
    arg_names, body = _launching_function(host_ir)
    blocks = _split_blocks(body)
    env: dict[str, Any] = dict(zip(arg_names, arg_values))
    memory: dict[_Ptr, Any] = {}
    config_base = attrs_base = None
    block, steps, launched = "", 0, False
    while not launched:
        _, lines = blocks[block]
        next_block = None
        for line in lines:
            steps += 1
            if steps > max_steps:
                raise ValueError("host function did not reach its launch within the step limit")
            if "@_cudaLaunchKernelEx" in line:
                launched = True
                break
            if line.startswith("llvm.return") or line.startswith("llvm.unreachable"):
                raise ValueError("host function returned before launching (it would fail at run time)")
            if line.startswith("llvm.br") or line.startswith("llvm.cond_br"):
                targets = _branch_targets(line)
                if line.startswith("llvm.cond_br"):
                    condition = env.get(re.match(r"llvm\.cond_br\s+(%\w+)", line).group(1))
                    if not isinstance(condition, int):
                        raise ValueError(f"cannot evaluate branch condition in: {line}")
                    target, operands = targets[0] if condition else targets[1]
                else:
                    target, operands = targets[0]
                values = [env.get(o) for o in operands]
                env.update(zip(blocks[target][0], values))
                next_block = target
                break
            if line.startswith("llvm.store"):
                match = re.match(r"llvm\.store\s+(%\w+),\s*(%\w+)", line)
                if match and isinstance(env.get(match.group(2)), _Ptr):
                    memory[env[match.group(2)]] = env.get(match.group(1))
                continue
            assign = _ASSIGN.match(line)
            if not assign:
                continue
            result, op, rest = assign.groups()
            env[result] = _evaluate(op, rest, result, env, memory)
            if op == "alloca":
                if "array<3 x i32>, array<3 x i32>, i64" in rest and config_base is None:
                    config_base = result
                elif "x struct<(i32, array<4 x i8>, array<64 x i8>)>" in rest and attrs_base is None:
                    attrs_base = result
        if not launched:
            if next_block is None:
                raise ValueError(f"block {block or 'entry'} ends without a branch")
            block = next_block
    if config_base is None:
        raise ValueError("no launch-config struct found in the host function")

    def field(*path: int) -> Any:
        return memory.get(_Ptr(config_base, path))

    attributes = _attributes(memory, attrs_base) if attrs_base is not None else {}
    cluster: tuple[Any, Any, Any] = (1, 1, 1)
    if CLUSTER_ATTRIBUTE_ID in attributes:
        words = attributes[CLUSTER_ATTRIBUTE_ID] + [None, None, None]
        cluster = (words[0], words[1], words[2])
    return LaunchGeometry(
        grid=(field(0, 0, 0), field(0, 0, 1), field(0, 0, 2)),
        block=(field(0, 1, 0), field(0, 1, 1), field(0, 1, 2)),
        smem_bytes=field(0, 2),
        cluster=cluster,
    )


def _attributes(memory: dict[_Ptr, Any], base: str) -> dict[int, list[Any]]:
    """Launch attributes written to the attribute array: id -> value words in order."""
    found: dict[int, list[Any]] = {}
    for slot in range(17):
        attribute_id = memory.get(_Ptr(base, (slot, 0)))
        if not isinstance(attribute_id, int):
            continue
        words = sorted(
            (key.path[2:], value) for key, value in memory.items()
            if key.base == base and key.path[:2] == (slot, 2)
        )
        found[attribute_id] = [value for _, value in words]
    return found


def _evaluate(op: str, rest: str, result: str, env: dict[str, Any], memory: dict[_Ptr, Any]) -> Any:
    if op == "mlir.constant":
        match = _CONST.match(rest.strip())
        if not match:
            return None
        text = match.group(1)
        return {"true": 1, "false": 0}.get(text, None) if not text.lstrip("-").isdigit() else int(text)
    operands = re.findall(r"%\w+", rest.split(":")[0])
    values = [env.get(o) for o in operands]
    if op == "alloca":
        return _Ptr(result, ())
    if op == "getelementptr":
        match = re.match(r"(?:inbounds\s+)?(%\w+)\[([^\]]*)\]", rest)
        if not match or not isinstance(env.get(match.group(1)), _Ptr):
            return None
        indices = tuple(
            int(i) if i.strip().lstrip("-").isdigit() else env.get(i.strip())
            for i in match.group(2).split(",")
        )
        return env[match.group(1)].at(indices)
    if op == "load":
        return memory.get(values[0]) if isinstance(values[0], _Ptr) else None
    if op == "bitcast" and isinstance(values[0], _Ptr):
        return values[0]
    if any(not isinstance(v, int) for v in values) or not values:
        return None
    bits = _bits(rest.split(":")[-1])
    if op in ("zext", "sext", "trunc"):
        return _wrap(values[0], _bits(rest.split(" to ")[-1])) if op != "zext" else values[0] & ((1 << _bits(rest.split(":")[1])) - 1)
    if op == "icmp":
        pred = re.match(r'"(\w+)"', rest.strip()).group(1)
        return _icmp(pred, values[0], values[1], _bits(rest.split(":")[-1]))
    if op == "select":
        return values[1] if values[0] else values[2]
    if len(values) == 2:
        return _binary(op, values[0], values[1], bits)
    return None
