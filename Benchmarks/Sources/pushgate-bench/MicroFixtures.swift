import Foundation
import Logging
import PushgateCore

/// The inputs every micro-benchmark shares, built before anything is timed: a typical alert payload,
/// distinct device tokens, the pushd-compatible datagram of a broadcast and a provider token.
enum MicroFixtures {
    /// A typical alert payload (133 bytes).
    static let payloadJSON =
        #"{"aps":{"alert":{"title":"Flash sale","body":"Everything is 20% off until midnight."},"badge":1,"#
        + #""sound":"default"},"campaign":"c-2041"}"#

    /// The notification datagram (UDP port 7874) for a broadcast of that payload to one group.
    static let notificationDatagram = Array(
        (#"{"groups": ["customers"], "type": "urgent", "expiration": 1900000000, "key": "sale-2041", "#
            + #""payload": \#(payloadJSON)}"#).utf8
    )

    static let topic = "com.example.shop"
    static let collapseID = "sale-2041"
    static let expirationSeconds: Int64 = 1_900_000_000
    static let receivedAt = Date(timeIntervalSince1970: 1_800_000_000)

    /// The `index`-th of a set of distinct 32-byte tokens.
    static func deviceToken(_ index: Int) throws -> DeviceToken {
        try DeviceToken(hex: String(format: "be64%060x", index))
    }

    static func content() throws -> NotificationContent {
        try NotificationContent(
            topic: Topic(topic),
            pushType: .alert,
            priority: .immediate,
            expiration: .at(epochSeconds: expirationSeconds),
            collapseID: CollapseID(collapseID),
            payload: Payload(jsonString: payloadJSON)
        )
    }

    /// A signer with a key made for this run (ES256, as the gateway signs).
    static func signer() throws -> ProviderTokenSigner {
        try ProviderTokenSigner(
            pemRepresentation: ThrowawayKey.make().privateKeyPEM,
            keyID: ThrowawayKey.keyID,
            teamID: ThrowawayKey.teamID
        )
    }

    /// Components log nothing while they are timed.
    static var quietLogger: Logger {
        var logger = Logger(label: "pushgate-bench.micro")
        logger.logLevel = .critical
        return logger
    }
}
