"""Operations tested as pyinfra tests its own: facts in, commands (or the no-op reason) out,
without a host. ``run_op`` runs an operation's body against a ``FakeHost`` whose facts are
given; a fact the test did not give fails the test (an operation that reads something new
must say so in its fixtures)."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

from pyinfra.api.command import FileUploadCommand, FunctionCommand, StringCommand
from pyinfra.context import ctx_host


class Data(dict):
    """Inventory data: ``data.key`` and ``data.get(key)``, as pyinfra's HostData answers."""

    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None


class FakeInventory(list):
    """The hosts of a run, in inventory order, as pyinfra's Inventory answers for them."""

    def get_active_hosts(self):
        return list(self)

    def get_group(self, name):
        return [h for h in self if name in h.groups]


@dataclass
class FakeHost:
    facts: dict = field(default_factory=dict)
    name: str = "b300"
    data: Data = field(default_factory=Data)
    executing: bool = False
    diff: bool = False
    noops: list = field(default_factory=list)
    logged: list = field(default_factory=list)
    groups: tuple = ("targets",)
    connected: bool = True
    # Commands run at execution (an operation's FunctionCommand): ``shell(text) -> (ok, stdout
    # lines)`` answers them, ``ran`` records them (described), ``uploads`` what put_file sent.
    shell: object = None
    ran: list = field(default_factory=list)
    uploads: dict = field(default_factory=dict)

    def __post_init__(self):
        # An inventory of this host alone, every host loaded at once (pyinfra's default
        # --parallel): what the rollout's barrier (``operations.rollout.join``) reads.
        self.state = SimpleNamespace(is_executing=self.executing, should_check_for_changes=lambda: True,
                                     config=SimpleNamespace(DIFF=self.diff), inventory=FakeInventory([self]),
                                     pool=SimpleNamespace(size=None), failed_hosts=set(), activated_hosts=[self],
                                     handlers=[])
        self.state.add_callback_handler = self.state.handlers.append

    def get_fact(self, cls, **kwargs):
        """A fact is looked up by its class name and keyword arguments
        (``"FileStats", root="/m"`` -> key ``("FileStats", ("root", "/m"))``), then by its
        class name alone."""
        key = (cls.__name__, *sorted(kwargs.items()))
        for k in (key, cls.__name__):
            if k in self.facts:
                return self.facts[k]
        raise AssertionError(f"the operation read the fact {key} on {self.name}, which the test did not give")

    def run_shell_command(self, command, **_kwargs):
        text = describe(command)
        self.ran.append(text)
        if self.shell is None:
            raise AssertionError(f"the operation ran `{text}` on {self.name}, which the test did not expect")
        ok, lines = self.shell(text)
        return ok, SimpleNamespace(stdout_lines=list(lines), stderr_lines=[], stdout="\n".join(lines), stderr="")

    def put_file(self, fileobj, dest, **_kwargs) -> bool:
        self.ran.append(f"upload -> {dest}")
        self.uploads[dest] = fileobj.read()
        return True

    def noop(self, reason: str) -> None:
        self.noops.append(reason)

    def log_styled(self, message, **_kwargs) -> None:
        self.logged.append(message)


def fact(name: str, **kwargs) -> tuple:
    return (name, *sorted(kwargs.items()))


def describe(command) -> str:
    """A command as text: a shell line, ``upload -> DEST``, ``fail: SENTENCE`` or ``call NAME``."""
    if isinstance(command, StringCommand):
        return command.get_raw_value()
    if isinstance(command, FileUploadCommand):
        return f"upload -> {command.dest}"
    if isinstance(command, FunctionCommand):
        if command.function.__name__ == "_report_failure":  # operations.util.fail
            return f"fail: {command.args[0]}"
        return f"call {command.function.__name__}"
    return str(command)


def run_op(op, host: FakeHost, *args, **kwargs) -> list[str]:
    """The commands ``op`` yields on ``host`` (described), its no-op reasons in ``host.noops``."""
    with ctx_host.use(host):
        return [describe(c) for c in op._inner(*args, **kwargs)]

