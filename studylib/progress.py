"""The progress lines of long runs (a sweep, the anchors' compiles ahead): elapsed time and ETA."""


def hms(seconds):
    """Seconds as h:mm:ss."""
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
