def main() -> None:
    raise SystemExit("seedline-web is not built yet")


if __name__ == "__main__":
    main()
