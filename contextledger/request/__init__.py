"""Request assembly: recording what the agent did, system segments, per-turn context,
instructions, prefix snapshots, cache breakpoints and the builder that turns a history into a
provider-neutral ``Request`` (the request types themselves are vocabulary:
``contextledger.vocabulary._requests``)."""

from contextledger.request._builder import BuiltRequest, RequestBuilder, RequestInputs, system_for
from contextledger.request._context import EditorState
from contextledger.request._instructions import (
    InstructionFile,
    InstructionPathError,
    directory_rules,
    global_instructions,
    project_instructions,
    system_instructions,
)
from contextledger.request._prepare import prepare_request
from contextledger.request._recording import (
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
from contextledger.request._system import (
    Skill,
    SystemSegments,
    family_prompt,
    prompt_family,
    render_skills,
    static_environment,
    system_blocks,
)

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
    "prompt_family",
    "render_skills",
    "static_environment",
    "system_blocks",
    "system_for",
    "system_instructions",
]
