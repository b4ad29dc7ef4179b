"""What both exporters share: Prometheus' text format (0.0.4) of their samples, and /metrics over
HTTP. Standard library only."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: (metric without the prefix, labels, value)
Sample = tuple[str, dict[str, str], float]


def number(value: float) -> str:
    """A sample's value as Prometheus reads it back exactly: integers whole, floats by repr."""
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return repr(float(value))


def label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def exposition(prefix: str, metrics: Mapping[str, tuple[str, str]], samples: Iterable[Sample]) -> str:
    """HELP and TYPE once per metric of ``metrics`` (name -> (type, help), in that order), its
    samples after them in the order they came."""
    by_metric: dict[str, list[Sample]] = {}
    for sample in samples:
        by_metric.setdefault(sample[0], []).append(sample)
    lines: list[str] = []
    for metric, (kind, text) in metrics.items():
        if metric not in by_metric:
            continue
        lines += [f"# HELP {prefix}{metric} {text}", f"# TYPE {prefix}{metric} {kind}"]
        for _, labels, value in by_metric[metric]:
            pairs = ",".join(f'{key}="{label_value(val)}"' for key, val in labels.items())
            lines.append(f"{prefix}{metric}{{{pairs}}} {number(value)}" if pairs else f"{prefix}{metric} {number(value)}")
    return "\n".join(lines) + "\n"


def samples_of(text: str) -> list[Sample]:
    """The samples of an exposition (comments and blank lines skipped), each as (the metric's full
    name, its labels, its value): the reverse of ``exposition``, label values unescaped, so that a
    comma, quote or brace inside one is the value's (the tests read exporters' answers with it)."""
    found: list[Sample] = []
    for line in text.splitlines():
        if line and not line.startswith("#"):
            found.append(_sample(line))
    return found


def _sample(line: str) -> Sample:
    name_end = min((index for index in (line.find("{"), line.find(" ")) if index >= 0), default=len(line))
    name, rest = line[:name_end], line[name_end:]
    labels: dict[str, str] = {}
    if rest.startswith("{"):
        rest = _labels(rest, labels)
    value = rest.split()[0]  # a timestamp may follow
    return name, labels, float(value)


def _labels(text: str, labels: dict[str, str]) -> str:
    """Fill ``labels`` from ``text`` ('{a="x",b="y"} 1'); the rest after the closing brace."""
    index = 1
    while text[index] != "}":
        equals = text.index("=", index)
        key, value, index = text[index:equals].strip(" ,"), [], equals + 2  # past '="'
        while text[index] != '"':
            escaped = text[index] == "\\"
            character = text[index + 1] if escaped else text[index]
            value.append("\n" if escaped and character == "n" else character)
            index += 2 if escaped else 1
        labels[key] = "".join(value)
        index += 1
        if text[index] == ",":
            index += 1
    return text[index + 1:]


def serve(scrape: Callable[[], str], address: str, port: int) -> None:
    """GET /metrics answers ``scrape()``'s text, anything else 404; serves until killed."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != "/metrics":
                self.send_error(404)
                return
            body = scrape().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    ThreadingHTTPServer((address, port), Handler).serve_forever()
