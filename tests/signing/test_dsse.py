"""DSSE envelopes (`acxfs.signing.dsse`): the pre-authentication encoding of the DSSE v1
spec, envelopes parsed for shape only, and signatures checked over PAE(type, payload), never
over the payload alone, with exactly the key named for each signature.

Signatures are made here with PyNaCl over a PAE written out by hand, never by acxfs.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Sequence

import nacl.signing
import pytest

from acxfs.errors import EnvelopeFormatError
from acxfs.limits import Limits
from acxfs.signing.dsse import (
    IN_TOTO_PAYLOAD_TYPE,
    check_signatures,
    pae,
    parse_envelope,
    sign_envelope,
)
from acxfs.signing.keys import PrivateKey, PublicKey

SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")
SEED = bytes(range(32))
KEY = nacl.signing.SigningKey(SEED)
RAW = bytes(KEY.verify_key)
KEYID = "ed25519:" + hashlib.sha256(SPKI_PREFIX + RAW).hexdigest()
PAYLOAD = b'{"_type":"https://in-toto.io/Statement/v1"}'


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def by_hand_pae(payload_type: str, payload: bytes) -> bytes:
    kind = payload_type.encode()
    return b"DSSEv1 " + str(len(kind)).encode() + b" " + kind + b" " + \
        str(len(payload)).encode() + b" " + payload


def envelope(payload: bytes = PAYLOAD, payload_type: str = IN_TOTO_PAYLOAD_TYPE,
             sigs: Sequence[object] | None = None) -> str:
    if sigs is None:
        sigs = [{"keyid": KEYID,
                 "sig": b64(KEY.sign(by_hand_pae(payload_type, payload)).signature)}]
    return json.dumps({"payloadType": payload_type, "payload": b64(payload), "signatures": sigs})


def key_for(keyid: str) -> PublicKey | None:
    return PublicKey(RAW) if keyid == KEYID else None


# --- PAE ----------------------------------------------------------------------------------------


def test_pae_is_the_dsse_v1_encoding_of_the_spec_example() -> None:
    assert pae("http://example.com/HelloWorld", b"hello world") == \
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"


def test_pae_counts_bytes_not_characters_and_keeps_any_byte() -> None:
    assert pae("t\u00e9", b"") == b"DSSEv1 3 t\xc3\xa9 0 "
    assert pae("", b"\x00 \n\xff") == b"DSSEv1 0  4 \x00 \n\xff"


def test_pae_lengths_keep_the_type_and_payload_apart() -> None:
    # without the lengths, "a b" + "c" and "a" + "b c" would be the same message
    assert pae("a b", b"c") != pae("a", b"b c")


# --- parsing (shape only) -----------------------------------------------------------------------


def test_an_envelope_is_parsed_into_its_type_payload_and_signatures() -> None:
    parsed = parse_envelope(envelope())
    assert parsed.payload_type == IN_TOTO_PAYLOAD_TYPE and parsed.payload == PAYLOAD
    (sig,) = parsed.signatures
    assert sig.keyid == KEYID and len(sig.sig) == 64


def test_url_safe_and_unpadded_base64_decode_to_the_same_bytes() -> None:
    payload = b"\xfb\xff\xbf" * 5 + b"!"  # + and / in standard base64, padding at the end
    standard = base64.b64encode(payload).decode()
    assert "+" in standard and "/" in standard and standard.endswith("=")
    urlsafe = base64.urlsafe_b64encode(payload).decode().rstrip("=")
    text = json.dumps({"payloadType": "x", "payload": urlsafe,
                       "signatures": [{"keyid": "k", "sig": "AAAA"}]})
    assert parse_envelope(text).payload == payload


def test_a_signature_without_keyid_is_kept_with_an_empty_one() -> None:
    text = json.dumps({"payloadType": "x", "payload": "", "signatures": [{"sig": "AAAA"}]})
    assert parse_envelope(text).signatures[0].keyid == ""


@pytest.mark.parametrize(("doc", "why"), [
    ("not json", "not JSON"),
    ("[" * 100_000 + "]" * 100_000, "not JSON"),  # too deep for the parser
    ("[]", "not a JSON object"),
    ({"payload": "", "signatures": [{"sig": ""}]}, "lacks payloadType or payload"),
    ({"payloadType": 1, "payload": "", "signatures": [{"sig": ""}]}, "lacks payloadType"),
    ({"payloadType": "x", "payload": None, "signatures": [{"sig": ""}]}, "lacks payloadType"),
    ({"payloadType": "x", "payload": ""}, "no usable signatures list"),
    ({"payloadType": "x", "payload": "", "signatures": []}, "no usable signatures list"),
    ({"payloadType": "x", "payload": "", "signatures": {"sig": ""}}, "no usable signatures"),
    ({"payloadType": "x", "payload": "", "signatures": [{"sig": ""}] * 17}, "no usable"),
    ({"payloadType": "x", "payload": "", "signatures": ["AAAA"]}, "signature is not an object"),
    ({"payloadType": "x", "payload": "", "signatures": [{"keyid": 1, "sig": ""}]}, "lacks keyid"),
    ({"payloadType": "x", "payload": "", "signatures": [{"keyid": "k"}]}, "lacks keyid or sig"),
    ({"payloadType": "x", "payload": "!!", "signatures": [{"sig": ""}]}, "invalid base64"),
    ({"payloadType": "x", "payload": "", "signatures": [{"sig": "A*=="}]}, "invalid base64"),
])
def test_an_envelope_of_the_wrong_shape_is_refused_naming_what_is_wrong(doc: object,
                                                                        why: str) -> None:
    text = doc if isinstance(doc, str) else json.dumps(doc)
    with pytest.raises(EnvelopeFormatError, match=why):
        parse_envelope(text)


def test_an_envelope_over_the_size_bound_is_refused_unread() -> None:
    text = envelope()
    with pytest.raises(EnvelopeFormatError, match="size limit"):
        parse_envelope(text, Limits(max_envelope_bytes=len(text) - 1))
    assert parse_envelope(text, Limits(max_envelope_bytes=len(text))).payload == PAYLOAD


# --- verification ------------------------------------------------------------------------------


def test_a_signature_over_the_pae_verifies_with_the_named_key() -> None:
    (check,) = check_signatures(parse_envelope(envelope()), key_for)
    assert check.valid and check.keyid == KEYID and check.key == PublicKey(RAW)


def test_a_signature_over_the_bare_payload_does_not_verify() -> None:
    bare = [{"keyid": KEYID, "sig": b64(KEY.sign(PAYLOAD).signature)}]
    (check,) = check_signatures(parse_envelope(envelope(sigs=bare)), key_for)
    assert not check.valid and check.key == PublicKey(RAW)


def test_changing_the_payload_type_or_one_payload_byte_breaks_the_signature() -> None:
    good = json.loads(envelope())
    for change in ({"payloadType": "application/json"},
                   {"payload": b64(PAYLOAD.replace(b"v1", b"v2"))}):
        (check,) = check_signatures(parse_envelope(json.dumps({**good, **change})), key_for)
        assert not check.valid


def test_a_signature_whose_keyid_names_no_key_is_not_checked() -> None:
    sigs = [{"keyid": "ed25519:" + "0" * 64,
             "sig": b64(KEY.sign(by_hand_pae(IN_TOTO_PAYLOAD_TYPE, PAYLOAD)).signature)}]
    (check,) = check_signatures(parse_envelope(envelope(sigs=sigs)), key_for)
    assert (check.valid, check.key) == (False, None)


def test_another_keys_signature_under_the_keyid_does_not_verify() -> None:
    other = nacl.signing.SigningKey(bytes(range(1, 33)))
    sigs = [{"keyid": KEYID,
             "sig": b64(other.sign(by_hand_pae(IN_TOTO_PAYLOAD_TYPE, PAYLOAD)).signature)}]
    (check,) = check_signatures(parse_envelope(envelope(sigs=sigs)), key_for)
    assert not check.valid


def test_each_signature_is_checked_on_its_own() -> None:
    good = {"keyid": KEYID,
            "sig": b64(KEY.sign(by_hand_pae(IN_TOTO_PAYLOAD_TYPE, PAYLOAD)).signature)}
    short = {"keyid": KEYID, "sig": b64(b"\x00" * 63)}
    checks = check_signatures(parse_envelope(envelope(sigs=[short, good, {"sig": "AAAA"}])),
                              key_for)
    assert [(c.keyid, c.valid) for c in checks] == [(KEYID, False), (KEYID, True), ("", False)]


def test_sign_envelope_signs_the_pae_with_the_keys_own_keyid() -> None:
    text = sign_envelope(IN_TOTO_PAYLOAD_TYPE, PAYLOAD, PrivateKey(SEED))
    doc = json.loads(text)
    assert doc["payloadType"] == IN_TOTO_PAYLOAD_TYPE
    assert base64.b64decode(doc["payload"]) == PAYLOAD
    (sig,) = doc["signatures"]
    assert sig["keyid"] == KEYID
    KEY.verify_key.verify(by_hand_pae(IN_TOTO_PAYLOAD_TYPE, PAYLOAD),
                          base64.b64decode(sig["sig"]))  # raises if it is not over the PAE
