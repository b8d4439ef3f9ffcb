"""Serving a team: the OpenID Connect login every page needs in team mode, and the identity labels are saved under
(docs/security.md). ``pages/_ui.py`` re-exports it for the pages."""

from __future__ import annotations

import os

import streamlit as st

TEAM_ENV = "PARIKSHA_TEAM"  # 1: serve a team (login required), whatever the address
UNVERIFIED_ENV = "PARIKSHA_TRUST_UNVERIFIED_EMAIL"  # 1: accept a login whose e-mail the provider has not verified
LOOPBACK = ("127.0.0.1", "localhost", "::1")
AUTH_KEYS = ("redirect_uri", "cookie_secret", "client_id", "client_secret", "server_metadata_url")


def team_mode() -> bool:
    """True when the dashboard serves a team: ``PARIKSHA_TEAM=1``, or a server address beyond this machine (an empty
    ``server.address`` listens on every interface). Then every page needs a login."""
    address = st.get_option("server.address") or ""
    return os.environ.get(TEAM_ENV, "").strip() == "1" or address not in LOOPBACK


def _missing_auth() -> list[str]:
    """The ``[auth]`` settings of ``.streamlit/secrets.toml`` that Streamlit's OpenID Connect login lacks."""
    try:
        auth = st.secrets.get("auth") if st.secrets.load_if_toml_exists() else None
    except Exception:  # an unreadable secrets.toml is as good as none
        auth = None
    return [k for k in AUTH_KEYS if not auth or not auth.get(k)]


def require_login() -> None:
    """In team mode: refuse to serve without ``[auth]`` (one line), else show only a login until the user has one."""
    if not team_mode():
        return
    missing = _missing_auth()
    if missing:
        st.error(f"Serving a team needs an OpenID Connect login: .streamlit/secrets.toml [auth] lacks "
                 f"{', '.join(missing)} (docs/security.md); or serve on 127.0.0.1 without {TEAM_ENV}=1.")
        st.stop()
    if not st.user.is_logged_in:
        st.title("Pariksha Studio")
        st.button("Log in", on_click=st.login, type="primary", icon=":material/login:")
        st.stop()
    if not email_verified():
        st.error(f"Your login has no e-mail address the identity provider has verified (email_verified is false or "
                 f"missing), so nothing can be saved under it: verify your address with the provider and log in "
                 f"again. A deployment whose provider vouches for its addresses without that claim sets "
                 f"{UNVERIFIED_ENV}=1 (docs/security.md).")
        st.button("Log out", on_click=st.logout, icon=":material/logout:")
        st.stop()


def email_verified() -> bool:
    """Whether the logged-in user's e-mail may name their labels: the provider's ``email_verified`` claim is true
    (a boolean, or the string "true" some providers send), or the deployment trusts unverified addresses
    (``PARIKSHA_TRUST_UNVERIFIED_EMAIL=1``)."""
    if os.environ.get(UNVERIFIED_ENV, "").strip() == "1":
        return True
    claim = st.user.get("email_verified")
    return claim is True or (isinstance(claim, str) and claim.strip().lower() == "true")


def identity() -> str:
    """The logged-in user as labels record them: the OpenID Connect email, else the subject."""
    return str(st.user.get("email") or st.user.get("sub") or "")
