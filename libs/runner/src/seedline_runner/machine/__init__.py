"""A runner machine of its own: the line it joins a platform with, its configuration in the
user's config folder, the check of its connection, and the user service that starts it with
the machine. Nothing here needs the platform's packages."""
