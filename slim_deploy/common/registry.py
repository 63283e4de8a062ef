"""Registry: the one shape of the project's name-to-thing tables (networks, datasets,
optimizers, learning-rate schedules, ps strategies, ...).

    OPTIMIZERS = Registry('optimizer', {'sgd': ..., 'adam': ...})
    OPTIMIZERS['adam']       # the entry
    OPTIMIZERS['lamb']       # UsageError: unknown --optimizer 'lamb'; valid: adam, sgd
"""
from slim_deploy.common.errors import UsageError


class Registry:
    """A read-only table of entries by name; `flag` is the flag (and parameter) that names
    them, so a failed lookup raises a UsageError naming the flag and listing every name.
    Iterating yields the names in sorted order."""

    def __init__(self, flag, entries):
        self.flag = flag
        self._entries = dict(entries)
        self.names = tuple(sorted(self._entries))

    def check(self, name):
        """Returns `name` if it is registered; raises UsageError naming the flag and every
        valid name if not."""
        if name not in self._entries:
            raise UsageError(f'unknown --{self.flag} {name!r}; valid: {", ".join(self.names)}')
        return name

    def __getitem__(self, name):
        return self._entries[self.check(name)]

    def __contains__(self, name):
        return name in self._entries

    def __iter__(self):
        return iter(self.names)

    def __len__(self):
        return len(self.names)

    def items(self):
        """(name, entry) pairs, by name."""
        return [(name, self._entries[name]) for name in self.names]

    def __repr__(self):
        return f'Registry({self.flag!r}, {list(self.names)!r})'
