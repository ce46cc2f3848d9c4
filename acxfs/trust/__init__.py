"""Trust: the pure policy (`policy`: who vouches for which publisher) and the trust store on
disk that feeds it (`store`).

Invariant: keys come only from outside the container being judged.
"""
