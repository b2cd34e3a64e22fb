"""Signed Ethereum transactions in pure Python (stdlib only).

Just enough for dashboards/check.py to load a dev node without installing
anything: keccak-256, RLP, secp256k1 signing (RFC 6979 nonces, low s) and
EIP-155 legacy transactions. Not constant time, not for real keys: it signs
with the public test-mnemonic dev keys only.
"""

import hashlib
import hmac

# --- keccak-256 (the pre-NIST padding Ethereum uses; hashlib's sha3_256 differs)

_RC = [
    0x0000000000000001, 0x0000000000008082, 0x800000000000808A, 0x8000000080008000,
    0x000000000000808B, 0x0000000080000001, 0x8000000080008081, 0x8000000000008009,
    0x000000000000008A, 0x0000000000000088, 0x0000000080008009, 0x000000008000000A,
    0x000000008000808B, 0x800000000000008B, 0x8000000000008089, 0x8000000000008003,
    0x8000000000008002, 0x8000000000000080, 0x000000000000800A, 0x800000008000000A,
    0x8000000080008081, 0x8000000000008080, 0x0000000080000001, 0x8000000080008008,
]
_ROT = [
    [0, 36, 3, 41, 18],
    [1, 44, 10, 45, 2],
    [62, 6, 43, 15, 61],
    [28, 55, 25, 21, 56],
    [27, 20, 39, 8, 14],
]
_M = (1 << 64) - 1


def _rol(v, n):
    return ((v << n) | (v >> (64 - n))) & _M if n else v


def _keccak_f(a):
    for rc in _RC:
        c = [a[x][0] ^ a[x][1] ^ a[x][2] ^ a[x][3] ^ a[x][4] for x in range(5)]
        d = [c[(x - 1) % 5] ^ _rol(c[(x + 1) % 5], 1) for x in range(5)]
        a = [[a[x][y] ^ d[x] for y in range(5)] for x in range(5)]
        b = [[0] * 5 for _ in range(5)]
        for x in range(5):
            for y in range(5):
                b[y][(2 * x + 3 * y) % 5] = _rol(a[x][y], _ROT[x][y])
        a = [[b[x][y] ^ ((~b[(x + 1) % 5][y]) & b[(x + 2) % 5][y]) for y in range(5)] for x in range(5)]
        a[0][0] ^= rc
    return a


def keccak256(data: bytes) -> bytes:
    rate = 136
    msg = bytearray(data)
    msg.append(0x01)
    while len(msg) % rate:
        msg.append(0)
    msg[-1] |= 0x80
    a = [[0] * 5 for _ in range(5)]
    for off in range(0, len(msg), rate):
        block = msg[off:off + rate]
        for i in range(rate // 8):
            x, y = i % 5, i // 5
            a[x][y] ^= int.from_bytes(block[8 * i:8 * i + 8], "little")
        a = _keccak_f(a)
    out = b"".join(a[i % 5][i // 5].to_bytes(8, "little") for i in range(4))
    return out


# --- RLP

def _rlp_len(n, offset):
    if n < 56:
        return bytes([offset + n])
    b = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([offset + 55 + len(b)]) + b


def rlp(item) -> bytes:
    if isinstance(item, int):
        item = item.to_bytes((item.bit_length() + 7) // 8, "big") if item else b""
    if isinstance(item, (bytes, bytearray)):
        if len(item) == 1 and item[0] < 0x80:
            return bytes(item)
        return _rlp_len(len(item), 0x80) + bytes(item)
    body = b"".join(rlp(i) for i in item)
    return _rlp_len(len(body), 0xC0) + body


# --- secp256k1

_P = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEFFFFFC2F
_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
_G = (
    0x79BE667EF9DCBBAC55A06295CE870B07029BFCDB2DCE28D959F2815B16F81798,
    0x483ADA7726A3C4655DA4FBFC0E1108A8FD17B448A68554199C47D08FFB10D4B8,
)


def _jac_double(p):
    x, y, z = p
    if not y:
        return (0, 0, 0)
    ysq = y * y % _P
    s = 4 * x * ysq % _P
    m = 3 * x * x % _P
    nx = (m * m - 2 * s) % _P
    ny = (m * (s - nx) - 8 * ysq * ysq) % _P
    return (nx, ny, 2 * y * z % _P)


def _jac_add(p, q):
    if not p[2]:
        return q
    if not q[2]:
        return p
    z1s, z2s = p[2] * p[2] % _P, q[2] * q[2] % _P
    u1, u2 = p[0] * z2s % _P, q[0] * z1s % _P
    s1, s2 = p[1] * z2s * q[2] % _P, q[1] * z1s * p[2] % _P
    if u1 == u2:
        return _jac_double(p) if s1 == s2 else (0, 0, 1)
    h, r = u2 - u1, s2 - s1
    h2 = h * h % _P
    h3 = h * h2 % _P
    u1h2 = u1 * h2 % _P
    nx = (r * r - h3 - 2 * u1h2) % _P
    ny = (r * (u1h2 - nx) - s1 * h3) % _P
    return (nx, ny, h * p[2] * q[2] % _P)


def _to_affine(p):
    zi = pow(p[2], -1, _P)
    return (p[0] * zi * zi % _P, p[1] * zi * zi * zi % _P)


# 2^i * G for i in 0..256: signing is then ~128 additions and no doublings.
_G_POW = []
_q = (_G[0], _G[1], 1)
for _ in range(256):
    _G_POW.append(_q)
    _q = _jac_double(_q)


def _mul_g(k):
    acc = (0, 0, 0)
    i = 0
    while k:
        if k & 1:
            acc = _jac_add(acc, _G_POW[i])
        k >>= 1
        i += 1
    return _to_affine(acc)


def _rfc6979_k(key: int, h: bytes) -> int:
    x = key.to_bytes(32, "big")
    h1 = (int.from_bytes(h, "big") % _N).to_bytes(32, "big")
    v, k = b"\x01" * 32, b"\x00" * 32
    k = hmac.new(k, v + b"\x00" + x + h1, hashlib.sha256).digest()
    v = hmac.new(k, v, hashlib.sha256).digest()
    k = hmac.new(k, v + b"\x01" + x + h1, hashlib.sha256).digest()
    v = hmac.new(k, v, hashlib.sha256).digest()
    while True:
        v = hmac.new(k, v, hashlib.sha256).digest()
        cand = int.from_bytes(v, "big")
        if 1 <= cand < _N:
            return cand
        k = hmac.new(k, v + b"\x00", hashlib.sha256).digest()
        v = hmac.new(k, v, hashlib.sha256).digest()


def sign(key: int, msg_hash: bytes):
    """(recovery id, r, s) with low s (EIP-2)."""
    z = int.from_bytes(msg_hash, "big")
    k = _rfc6979_k(key, msg_hash)
    rx, ry = _mul_g(k)
    r = rx % _N
    s = pow(k, -1, _N) * (z + r * key) % _N
    recid = (ry & 1) | (2 if rx >= _N else 0)
    if s > _N // 2:
        s = _N - s
        recid ^= 1
    return recid, r, s


def address(key: int) -> bytes:
    x, y = _mul_g(key)
    return keccak256(x.to_bytes(32, "big") + y.to_bytes(32, "big"))[12:]


def legacy_tx(key: int, chain_id: int, nonce: int, gas_price: int, gas: int, to: bytes, value: int,
              data: bytes = b"") -> bytes:
    """A signed EIP-155 legacy transaction, RLP-encoded (what eth_sendRawTransaction takes)."""
    fields = [nonce, gas_price, gas, to, value, data]
    recid, r, s = sign(key, keccak256(rlp(fields + [chain_id, 0, 0])))
    return rlp(fields + [chain_id * 2 + 35 + recid, r, s])


# The first dev accounts of the test mnemonic (`test test ... junk`, m/44'/60'/0'/0/i),
# which sluice's dev node funds exactly as anvil does. Public, test-only keys.
DEV_KEYS = [
    0xAC0974BEC39A17E36BA4A6B4D238FF944BACB478CBED5EFCAE784D7BF4F2FF80,
    0x59C6995E998F97A5A0044966F0945389DC9E86DAE88C7A8412F4603B6B78690D,
    0x5DE4111AFA1A4B94908F83103EB1F1706367C2E68CA870FC3FB9A804CDAB365A,
    0x7C852118294E51E653712A81E05800F419141751BE58F605C371E15141B007A6,
    0x47E179EC197488593B187F80A00EB0DA91F1B9D0B13F8733639F19C30A34926A,
    0x8B3A350CF5C34C9194CA85829A2DF0EC3153BE0318B5E2D3348E872092EDFFBA,
    0x92DB14E403B83DFE3DF233F83DFA3A0D7096F21CA9B0D6D6B8D88B2B4EC1564E,
    0x4BBBF85CE3377467AFE5D46F804F221813B2BB87F24D81F60F1FCDBF7CBF4356,
    0xDBDA1821B80551C9D65939329250298AA3472BA22FEEA921C0CF5D620EA67B97,
    0x2A871D0798F97D79848A013D4936A73BF4CC922C825D33C1CF7073DFF6D409C6,
]
