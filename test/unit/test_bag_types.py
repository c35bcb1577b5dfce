"""Foundation: every r3_msgs type round-trips through a rosbag2 MCAP bag written with `rosbags`,
using definitions read from msg/, and those definitions match the r3_msgs that CMake built."""

from __future__ import annotations

import numpy as np
import pytest
from rosbags.rosbag2 import Reader, StoragePlugin, Writer
from rosbags.typesys.store import Nodetype

from r3.data.bagtypes import interface_definitions, typestore

BASE_VALUES = {
    "bool": lambda rng: bool(rng.integers(2)),
    "string": lambda rng: "".join(rng.choice(list("abc xyz:ÄÖ.")) for _ in range(rng.integers(0, 12))),
}
NUMPY_TYPES = {
    "float32": np.float32,
    "float64": np.float64,
    "int8": np.int8,
    "uint8": np.uint8,
    "int16": np.int16,
    "uint16": np.uint16,
    "int32": np.int32,
    "uint32": np.uint32,
    "int64": np.int64,
    "uint64": np.uint64,
}


def sample(store, name: str, rng: np.random.Generator):
    """A message of type ``name`` with every field filled with random, type-correct values."""
    _, fields = store.fielddefs[name]
    return store.types[name](**{field: _value(store, desc, rng) for field, desc in fields})


def _base(kind: str, rng):
    if kind in BASE_VALUES:
        return BASE_VALUES[kind](rng)
    if kind.startswith("float"):
        return float(NUMPY_TYPES[kind](rng.normal() * 100))
    info = np.iinfo(NUMPY_TYPES[kind])
    return int(rng.integers(max(info.min, -(2**31)), min(info.max, 2**31 - 1)))


def _value(store, desc, rng):
    node, spec = desc
    if node == Nodetype.BASE:
        return _base(spec[0], rng)
    if node == Nodetype.NAME:
        return sample(store, spec, rng)
    (inner_node, inner_spec), length = spec
    count = length if node == Nodetype.ARRAY else int(rng.integers(0, 4))
    if inner_node == Nodetype.BASE and inner_spec[0] in NUMPY_TYPES:
        values = [_base(inner_spec[0], rng) for _ in range(count)]
        return np.array(values, dtype=NUMPY_TYPES[inner_spec[0]])
    return [_value(store, (inner_node, inner_spec), rng) for _ in range(count)]


def plain(msg):
    """Message -> nested plain Python values, for equality checks."""
    if hasattr(msg, "__dataclass_fields__"):
        return {k: plain(getattr(msg, k)) for k in msg.__dataclass_fields__ if k != "__msgtype__"}
    if isinstance(msg, np.ndarray):
        return msg.tolist()
    if isinstance(msg, list):
        return [plain(m) for m in msg]
    return msg


def test_every_interface_file_contributes_types():
    names = set(interface_definitions())
    for expected in [
        "r3_msgs/msg/ReasonerStep",
        "r3_msgs/msg/DetectedObjects",
        "r3_msgs/srv/GroundPoint_Request",
        "r3_msgs/srv/SetPerceptionQuery_Response",
        "r3_msgs/srv/ResetScene_Response",
        "r3_msgs/action/RunTask_Goal",
        "r3_msgs/action/FollowInstruction_Result",
        "r3_msgs/action/MoveToPose_Feedback",
    ]:
        assert expected in names


def test_every_r3_msgs_type_round_trips_through_an_mcap_bag(tmp_path):
    store = typestore()
    rng = np.random.default_rng(0)
    written = {}
    bag = tmp_path / "all_types"
    with Writer(bag, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        for i, name in enumerate(interface_definitions()):
            conn = writer.add_connection(f"/test/{name.replace('/', '_')}", name, typestore=store)
            msgs = [sample(store, name, rng) for _ in range(3)]
            for j, msg in enumerate(msgs):
                writer.write(conn, 1_000_000_000 * i + j, store.serialize_cdr(msg, name))
            written[name] = [plain(m) for m in msgs]
    assert [p.suffix for p in bag.iterdir() if p.name != "metadata.yaml"] == [".mcap"]
    read: dict[str, list] = {}
    with Reader(bag) as reader:
        for conn, _, raw in reader.messages():
            read.setdefault(conn.msgtype, []).append(plain(store.deserialize_cdr(raw, conn.msgtype)))
    assert read == written


@pytest.mark.ros
def test_bag_definitions_match_the_built_r3_msgs():
    """CDR bytes from the CMake-built r3_msgs (rclpy) decode with the msg/-derived definitions."""
    from rclpy.serialization import serialize_message

    from r3_msgs.action import RunTask
    from r3_msgs.msg import DetectedObject, ReasonerStep

    step = ReasonerStep(
        episode_id="e1",
        step=4,
        reasoning="the red moon is left",
        instruction="move the red moon up",
        valid=True,
        latency_model_s=0.25,
        completion_tokens=17,
    )
    step.header.stamp.sec = 12
    obj = DetectedObject(label="sugar box", score=0.5, box_xyxy=[1, 2, 3, 4], top_height=0.125)
    obj.principal_axes[1].y = 1.0
    result = RunTask.Result(success=True, steps=7, instructions=["a", "b"], reason="success")
    store = typestore()
    decoded = store.deserialize_cdr(serialize_message(step), "r3_msgs/msg/ReasonerStep")
    assert (
        decoded.header.stamp.sec,
        decoded.episode_id,
        decoded.step,
        decoded.reasoning,
        decoded.valid,
        decoded.latency_model_s,
        decoded.completion_tokens,
    ) == (12, "e1", 4, "the red moon is left", True, 0.25, 17)
    decoded = store.deserialize_cdr(serialize_message(obj), "r3_msgs/msg/DetectedObject")
    assert decoded.box_xyxy.tolist() == [1, 2, 3, 4] and decoded.principal_axes[1].y == 1.0
    assert decoded.label == "sugar box" and decoded.top_height == 0.125
    decoded = store.deserialize_cdr(serialize_message(result), "r3_msgs/action/RunTask_Result")
    assert decoded.instructions == ["a", "b"] and decoded.steps == 7 and decoded.success


def test_a_bag_written_with_an_older_definition_is_read_with_its_own(tmp_path):
    """A field added to an r3_msgs type (ReasonerStep's finish_reason, say) must not make the bags
    recorded before it unreadable: each is read with the definitions it holds. Here, ReasonerStep as
    it was without its last field, written by rosbags as rosbag2 would."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    from r3.data.bags import read_messages

    name = "r3_msgs/msg/ReasonerStep"
    current = interface_definitions()[name].splitlines()
    last = max(i for i, line in enumerate(current) if line.strip() and not line.lstrip().startswith("#"))
    dropped = current[last].split()[1]  # the last field, as if not yet added
    older = get_typestore(Stores.ROS2_KILTED)
    older.register(get_types_from_msg("\n".join(current[:last]), name))
    assert older.hash_rihs01(name) != typestore().hash_rihs01(name)
    bag = tmp_path / "older"
    with Writer(bag, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conn = writer.add_connection("/r3/reasoner/steps", name, typestore=older)
        for step in range(3):
            msg = sample(older, name, np.random.default_rng(step))
            msg.step, msg.raw_response = step, f"Instruction: answer {step}"
            writer.write(conn, 1_000 + step, older.serialize_cdr(msg, name))
    steps = [msg for _, _, _, msg in read_messages(bag)]
    assert [(m.step, m.raw_response) for m in steps] == [(k, f"Instruction: answer {k}") for k in range(3)]
    assert not hasattr(steps[0], dropped)
