"""Which process answers each request/reply API, so an error can say which part of
Seedline is not running. GENERATED from the routing tables by `make schema`
(seedline_devtools.generated); do not edit."""

ANSWERED_BY: dict[str, str] = {
    'seedline.api.briefs.get': 'seed-composer',
    'seedline.api.instances.forget': 'timeline-writer',
    'seedline.api.machines.remove': 'runner-gateway',
    'seedline.api.sessions.list': 'runner-gateway',
    'seedline.api.sessions.open': 'continuity-resolver',
    'seedline.api.sessions.relocate': 'continuity-resolver',
    'seedline.api.sessions.stop': 'runner-gateway',
    'seedline.api.timeline.append': 'timeline-writer',
    'seedline.api.timeline.read': 'timeline-writer',
}
