"""Request assembly: recording what the agent did, system segments, per-turn context,
instructions, prefix snapshots, cache breakpoints and the builder that turns a history into a
provider-neutral ``Request`` (the request types themselves are vocabulary:
``contextledger.vocabulary.requests``)."""

from contextledger.request.builder import BuiltRequest, RequestBuilder, RequestInputs, system_for
from contextledger.request.context import EditorState
from contextledger.request.instructions import (
    InstructionFile,
    InstructionPathError,
    directory_rules,
    global_instructions,
    project_instructions,
    system_instructions,
)
from contextledger.request.prepare import prepare_request
from contextledger.request.recording import (
    AddText,
    AddUser,
    AssistantStep,
    CallTool,
    Command,
    Finish,
    InvalidCommand,
    Recorder,
    RecordingCommand,
    StartAssistant,
    StartStep,
    ToolResult,
)
from contextledger.request.system import Skill, SystemSegments, family_prompt, system_blocks

__all__ = [
    "AddText",
    "AddUser",
    "AssistantStep",
    "BuiltRequest",
    "CallTool",
    "Command",
    "EditorState",
    "Finish",
    "InstructionFile",
    "InstructionPathError",
    "InvalidCommand",
    "Recorder",
    "RecordingCommand",
    "RequestBuilder",
    "RequestInputs",
    "Skill",
    "StartAssistant",
    "StartStep",
    "SystemSegments",
    "ToolResult",
    "directory_rules",
    "family_prompt",
    "global_instructions",
    "prepare_request",
    "project_instructions",
    "system_blocks",
    "system_for",
    "system_instructions",
]
