"""Endpoints: how a request to a custom endpoint (a model with an ``api_base``) is made.

Which key it is sent with (``endpoint_client``) and where its connection may go, checked when
the connection is made (``address_guard``). Import from the modules themselves; this
package's face imports nothing.
"""
