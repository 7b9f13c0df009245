//! The container verbs against a fake systemd.
