"""`seedline-web`: the HTTP API, the console and MCP over HTTP, until SIGTERM."""

from seedline_platform.service import main_for

from .app import NAME, create_app


def main() -> None:
    main_for(NAME, create_app)


if __name__ == "__main__":
    main()
