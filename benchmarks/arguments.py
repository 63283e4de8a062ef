"""argparse types the benchmark scripts share (run as scripts, they import it from their own
directory)."""
import argparse


def at_least(minimum, kind=int):
    """argparse type: a number of `kind` >= minimum."""
    def number(text):
        value = kind(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f'must be >= {minimum}, got {value}')
        return value
    return number


def names_in(valid):
    """argparse type: a comma-separated list of names from `valid`, each once, in the order
    given."""
    def names(text):
        listed = [name.strip() for name in text.split(',') if name.strip()]
        unknown = [name for name in listed if name not in valid]
        if unknown or not listed:
            raise argparse.ArgumentTypeError(
                f'{",".join(unknown) or "nothing"} is not in {", ".join(valid)}')
        return list(dict.fromkeys(listed))
    return names
