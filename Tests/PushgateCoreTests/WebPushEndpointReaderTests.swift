import PushgateCore
import Testing

/// Each message's send reads its subscription back from the stored token, so the endpoint is parsed once
/// a message: the common forms skip `URLComponents` (``WebPushSubscription/parseCommonEndpoint(_:)``),
/// which must then give exactly what the general reader gives.
@Suite("Web Push: the cheap endpoint reader")
struct WebPushEndpointReaderTests {
    @Test("the push services' endpoint forms are read without URLComponents, to the same origin and path")
    func commonEndpointsTakeTheCheapPath() throws {
        let endpoints = [
            "https://fcm.googleapis.com/fcm/send/cXqLz0n1Vf4:APA91bHq-Ab_cd~ef",
            "https://updates.push.services.mozilla.com/wpush/v2/gAAAAABlXyz-_abc",
            "https://web.push.apple.com/QGuQyavXutnMH1l-Xd8Ze8Wb",
            "https://push.example.net/wpush/v2/abc?x=1&y=(2)",
            "https://Push.Example.NET:443/a",
            "https://127.0.0.1:8443/push/1",
            "https://push.example.net",
            "https://push.example.net?x=1",
            "https://push.example.net:09/a:b@c;d,e+f!g$h*i'j=k",
        ]
        for endpoint in endpoints {
            let general = try WebPushSubscription.parseAnyEndpoint(endpoint, field: "endpoint")
            let cheap = try #require(WebPushSubscription.parseCommonEndpoint(endpoint), "\(endpoint)")
            #expect(cheap.0 == general.0, "\(endpoint)")
            #expect(cheap.1 == general.1, "\(endpoint)")
        }
    }

    @Test(
        "percent-encoding, IPv6 literals, fragments, user info and other schemes are left to URLComponents",
        arguments: [
            "https://wns2-par02p.notify.windows.com/w/?token=BQYAAAB%2b", "https://[::1]:9000/p",
            "https://push.example.net/a#frag", "https://user:pw@push.example.net/a", "HTTPS://push.example.net/a",
            "http://push.example.net/a", "https://push.example.net:/a", "https://push.example.net:65536/a",
            "https://push.example.net:0/a", "https:///nohost", "https://push_example.net/a",
        ]
    )
    func unusualEndpointsTakeTheGeneralPath(endpoint: String) {
        #expect(WebPushSubscription.parseCommonEndpoint(endpoint) == nil)
    }

    @Test("whatever the cheap reader accepts, URLComponents reads the same (20,000 generated strings)")
    func cheapReaderAgreesWithURLComponents() {
        // Strings near the accepted form: characters a URL may hold and some it may not.
        let pieces = [
            "https://", "HTTPS://", "http://", "a", "Z", "0", "9", ".", "-", "_", "~", ":", "443", "65536", "0",
            "/", "?", "#", "%", "%2F", "=", "&", "+", ",", ";", "@", "!", "$", "*", "'", "(", ")", "[", "]", "::1",
            "\\", "|", "^", "`", "{", "}", "\"", "<", ">", "é", "push.example.net", "/wpush/v2/",
        ]
        var generator = SplitMix64(seed: 26)
        var accepted = 0
        for _ in 0..<20_000 {
            var text = generator.next() % 4 == 0 ? "" : "https://"
            for _ in 0..<(1 + Int(generator.next() % 8)) {
                text += pieces[Int(generator.next() % UInt64(pieces.count))]
            }
            guard let cheap = WebPushSubscription.parseCommonEndpoint(text) else { continue }
            accepted += 1
            let general = try? WebPushSubscription.parseAnyEndpoint(text, field: "endpoint")
            #expect(general?.0 == cheap.0, "\(text)")
            #expect(general?.1 == cheap.1, "\(text)")
        }
        #expect(accepted > 300)
    }
}
