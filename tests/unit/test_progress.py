from fpspec.progress import phase, reporting


class Record:
    def __init__(self):
        self.events = []

    def start(self, name, total):
        self.events.append(("start", name, total))

    def advance(self, name, steps):
        self.events.append(("advance", name, steps))

    def finish(self, name):
        self.events.append(("finish", name))


def test_phases_reach_the_installed_sink_and_nothing_without_one():
    with phase("quiet", 3) as advance:
        advance()
    sink = Record()
    with reporting(sink):
        with phase("fit", 2) as advance:
            advance()
            advance(1)
        with phase("held-out check") as advance:
            pass
    with phase("after", 1) as advance:
        advance()
    assert sink.events == [("start", "fit", 2), ("advance", "fit", 1), ("advance", "fit", 1), ("finish", "fit"),
                           ("start", "held-out check", None), ("finish", "held-out check")]
