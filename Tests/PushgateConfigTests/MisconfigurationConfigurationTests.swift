import PushgateConfig
import PushgateCore
import Testing

/// The thresholds of the configuration alarm (`misconfiguration.*`): defaults, every source, and a bad value
/// named by its key.
@Suite("Configuration: misconfiguration.* thresholds")
struct MisconfigurationConfigurationTests {
    @Test("the defaults: on, more than half of 100 answers within 60 s, probes after 30 s up to 600 s, 10 a probe")
    func defaults() async throws {
        let guardKeys = try await load().misconfiguration
        #expect(guardKeys.enabled)
        #expect(guardKeys.windowSeconds == 60)
        #expect(guardKeys.minimumAnswers == 100)
        #expect(guardKeys.share == 0.5)
        #expect(guardKeys.probeAfterSeconds == 30)
        #expect(guardKeys.probeLimitSeconds == 600)
        #expect(guardKeys.probeAnswers == 10)
    }

    @Test("each key from the environment or as a generic flag")
    func everySource() async throws {
        let loaded = try await load(
            environment: [
                "PUSHGATE_MISCONFIGURATION_SHARE": "0.7", "PUSHGATE_MISCONFIGURATION_PROBE_AFTER": "5",
                "PUSHGATE_MISCONFIGURATION_PROBE_LIMIT": "50",
            ],
            arguments: [
                "--misconfiguration-window", "30", "--misconfiguration-minimum-answers", "50",
                "--misconfiguration-probe-answers", "3", "--misconfiguration-enabled", "false",
            ]
        ).misconfiguration
        #expect(!loaded.enabled)
        #expect(loaded.windowSeconds == 30)
        #expect(loaded.minimumAnswers == 50)
        #expect(loaded.share == 0.7)
        #expect(loaded.probeAfterSeconds == 5)
        #expect(loaded.probeLimitSeconds == 50)
        #expect(loaded.probeAnswers == 3)
    }

    @Test("a bad value stops start-up with one line naming the key")
    func badValuesNameTheKey() async {
        let cases: [([String: String], String)] = [
            (["PUSHGATE_MISCONFIGURATION_SHARE": "half"], "misconfiguration.share: must be a number (got \"half\")"),
            (["PUSHGATE_MISCONFIGURATION_SHARE": "1"], "misconfiguration.share: must lie between 0 and 1 (got 1.0)"),
            (["PUSHGATE_MISCONFIGURATION_WINDOW": "0"], "misconfiguration.window: at least 1 second"),
            (["PUSHGATE_MISCONFIGURATION_MINIMUM_ANSWERS": "0"], "misconfiguration.minimumAnswers: at least 1"),
            (["PUSHGATE_MISCONFIGURATION_PROBE_AFTER": "0"], "misconfiguration.probeAfter: at least 1 second"),
            (
                ["PUSHGATE_MISCONFIGURATION_PROBE_LIMIT": "10"],
                "misconfiguration.probeLimit: at least misconfiguration.probeAfter (30)"
            ),
            (["PUSHGATE_MISCONFIGURATION_PROBE_ANSWERS": "0"], "misconfiguration.probeAnswers: at least 1"),
            (
                ["PUSHGATE_MISCONFIGURATION_ENABLED": "maybe"],
                "misconfiguration.enabled: must be true or false (got \"maybe\")"
            ),
        ]
        for (environment, expected) in cases {
            let found = await problem { () async throws(ConfigurationProblem) in
                _ = try await load(environment: environment)
            }
            #expect(found?.description == expected, "\(environment)")
        }
    }
}

/// `dispatch.inFlightWindow`: on unless set off, from a flag or the environment.
@Suite("Configuration: dispatch.inFlightWindow")
struct InFlightWindowConfigurationTests {
    @Test("on by default; off from --dispatch-in-flight-window false or PUSHGATE_DISPATCH_IN_FLIGHT_WINDOW")
    func onUnlessSetOff() async throws {
        #expect(try await load().dispatchInFlightWindow)
        #expect(try await load(arguments: ["--dispatch-in-flight-window", "false"]).dispatchInFlightWindow == false)
        #expect(
            try await load(environment: ["PUSHGATE_DISPATCH_IN_FLIGHT_WINDOW": "false"]).dispatchInFlightWindow
                == false
        )
        #expect(try await load(arguments: ["--dispatch-in-flight-window", "true"]).dispatchInFlightWindow)
    }
}
