from seedline_platform.service import main_for

from .app import NAME, create_app
from .rebuild import rebuild_command


def main() -> None:
    main_for(NAME, create_app, rebuild_command)


if __name__ == "__main__":
    main()
