"""What the platform tells the people of an instance, on seedline.notify.<instance>."""

from __future__ import annotations

from typing import Protocol

from nats.aio.client import Client

from seedline_contracts import subjects
from seedline_contracts.codec import encode
from seedline_contracts.sessions import (
    Notification,
    RunnerOfflineNotification,
    RunnerRestartedNotification,
)
from seedline_core.notices import runner_offline_notice_text, runner_restarted_text
from seedline_platform.sending import check_send


def machine_offline(session_id: str, node_id: str, label: str | None):
    """The notice for a conversation that stopped because its machine went offline."""
    return lambda at: RunnerOfflineNotification(
        session_id=session_id, node_id=node_id,
        text=runner_offline_notice_text(label, node_id), at=at,
    )


def machine_restarted(session_id: str, node_id: str, label: str | None):
    """The notice for a conversation its machine no longer runs (it restarted, or ended it
    when cut off from the platform)."""
    return lambda at: RunnerRestartedNotification(
        session_id=session_id, node_id=node_id, text=runner_restarted_text(label, node_id),
        at=at,
    )


class Notifier(Protocol):
    async def notify(self, instance_id: str, notification: Notification,
                     notice_id: str | None = None) -> None:
        """Publish a notice; one with a `notice_id` sent again is kept once by
        SEEDLINE_NOTICES (its Nats-Msg-Id, within the stream's duplicate window)."""
        ...


class NatsNotifier:
    def __init__(self, nc: Client) -> None:
        self._nc = nc

    async def notify(self, instance_id: str, notification: Notification,
                     notice_id: str | None = None) -> None:
        headers = {"Nats-Msg-Id": notice_id[:256]} if notice_id else None
        check_send(subjects.notify_subject(instance_id))
        await self._nc.publish(subjects.notify_subject(instance_id), encode(notification),
                               headers=headers)


class RecordingNotifier:
    def __init__(self) -> None:
        self.sent: list[tuple[str, Notification]] = []

    async def notify(self, instance_id: str, notification: Notification,
                     notice_id: str | None = None) -> None:
        check_send(subjects.notify_subject(instance_id))
        self.sent.append((instance_id, notification))

    def kinds(self) -> list[str]:
        return [type(n).__struct_config__.tag for _, n in self.sent]
