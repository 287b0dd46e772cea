/// Faults the simulator injects, settable at run time (in process with
/// `RunningAPNsSimulator.setFaults(_:)` or over the control API with `POST /faults`).
///
/// Control API keys (JSON object; every key optional; keys absent keep their value, `null`
/// resets a key to its default; unknown keys are rejected):
///
/// | key | type | meaning |
/// |---|---|---|
/// | `latency_ms` | integer ≥ 0 | wait this long before answering each request |
/// | `rate_429` | number 0...1 | share of requests answered 429 `TooManyRequests` |
/// | `rate_500` | number 0...1 | share answered 500 `InternalServerError` |
/// | `rate_503` | number 0...1 | share answered 503 `ServiceUnavailable` (sum of rates ≤ 1) |
/// | `goaway_after_streams` | integer ≥ 1 | on each connection, GOAWAY with last-stream-id = the N-th stream; streams above it get no answer; close once the rest are answered |
/// | `drop_after_streams` | integer ≥ 0 | close each connection (no GOAWAY) once N streams are answered; 0 = close new connections on accept |
/// | `drop_now` | true | close every live connection now (an action, not remembered) |
/// | `max_concurrent_streams` | integer ≥ 0 | send a new `SETTINGS_MAX_CONCURRENT_STREAMS` on every live connection, and use it for new ones |
/// | `blackhole` | boolean | never answer requests received while set (for client deadline tests) |
/// | `every_token_bad` | boolean | answer 400 `BadDeviceToken` to every HTTP/2 request that would be accepted, as APNs answers tokens of the other environment (a sandbox token sent to production) |
/// | `hold_answers` | boolean | hold the answers of requests received while set; clearing it sends them all (tests that need many streams open at once, whatever the machine's speed) |
/// | `seed` | integer ≥ 0 | reseed the random generator that draws the error rates |
///
/// Faults apply to requests and connections from the moment they are set; requests already
/// answered are not affected.
public struct SimulatorFaults: Sendable, Equatable {
    public var latencyMilliseconds: Int = 0
    public var rate429: Double = 0
    public var rate500: Double = 0
    public var rate503: Double = 0
    public var goAwayAfterStreams: Int? = nil
    public var dropAfterStreams: Int? = nil
    /// nil = the configuration's `maxConcurrentStreams`.
    public var maxConcurrentStreams: Int? = nil
    public var blackhole: Bool = false
    /// Every device token is refused with `BadDeviceToken` (the wrong-environment mistake).
    public var everyTokenBad: Bool = false
    /// Answers decided while set wait until it is cleared, then go out at once.
    public var holdAnswers: Bool = false

    public init(
        latencyMilliseconds: Int = 0,
        rate429: Double = 0,
        rate500: Double = 0,
        rate503: Double = 0,
        goAwayAfterStreams: Int? = nil,
        dropAfterStreams: Int? = nil,
        maxConcurrentStreams: Int? = nil,
        blackhole: Bool = false,
        everyTokenBad: Bool = false,
        holdAnswers: Bool = false
    ) {
        self.latencyMilliseconds = latencyMilliseconds
        self.rate429 = rate429
        self.rate500 = rate500
        self.rate503 = rate503
        self.goAwayAfterStreams = goAwayAfterStreams
        self.dropAfterStreams = dropAfterStreams
        self.maxConcurrentStreams = maxConcurrentStreams
        self.blackhole = blackhole
        self.everyTokenBad = everyTokenBad
        self.holdAnswers = holdAnswers
    }

    /// No faults.
    public static var none: SimulatorFaults { .init() }

    var hasErrorRates: Bool {
        self.rate429 > 0 || self.rate500 > 0 || self.rate503 > 0
    }

    /// Checks ranges; the error names the offending key as the control API spells it.
    func validated() throws -> SimulatorFaults {
        func fail(_ key: String, _ problem: String) -> SimulatorError {
            .invalidFaults(key: key, problem: problem)
        }
        guard self.latencyMilliseconds >= 0 else { throw fail("latency_ms", "must be ≥ 0") }
        for (key, rate) in [("rate_429", self.rate429), ("rate_500", self.rate500), ("rate_503", self.rate503)] {
            guard rate >= 0 && rate <= 1 else { throw fail(key, "must be between 0 and 1") }
        }
        guard self.rate429 + self.rate500 + self.rate503 <= 1.000_000_1 else {
            throw fail("rate_429", "rate_429 + rate_500 + rate_503 must not exceed 1")
        }
        if let n = self.goAwayAfterStreams, n < 1 { throw fail("goaway_after_streams", "must be ≥ 1") }
        if let n = self.dropAfterStreams, n < 0 { throw fail("drop_after_streams", "must be ≥ 0") }
        if let n = self.maxConcurrentStreams, n < 0 || n > Int(Int32.max) {
            throw fail("max_concurrent_streams", "must be between 0 and 2^31-1")
        }
        return self
    }
}

/// A small seedable generator (SplitMix64) for fault draws and generated identifiers.
struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    init(seed: UInt64) {
        self.state = seed
    }

    init() {
        var system = SystemRandomNumberGenerator()
        self.state = system.next()
    }

    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A double uniformly in [0, 1).
    mutating func nextUnit() -> Double {
        Double(self.next() >> 11) * (1.0 / Double(UInt64(1) << 53))
    }
}
