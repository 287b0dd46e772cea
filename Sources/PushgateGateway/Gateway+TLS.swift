import Foundation
import Logging
import PushgateHTTP

extension Gateway {
    /// The HTTP API's side of TLS at start-up: with TLS, its certificate joins the reload hook (new
    /// connections get a renewed certificate after SIGHUP; a bad file on reload is logged and the previous
    /// certificate stays); without TLS on an address beyond loopback, one warning that bearer keys cross
    /// the network in clear text.
    /// - Parameter reloadHook: where the certificate's own reloader goes; nil when the configuration's
    ///   reloader (``ConfigurationReloader``) reloads it with everything else.
    static func prepareTLS(of http: HTTPAPI.Configuration, reloadHook: ReloadHook?, logger: Logger) {
        guard let tls = http.tls else {
            if !isLoopback(http.host) {
                logger.warning(
                    "the HTTP API listens beyond loopback without TLS: bearer keys and requests travel in clear text (configure http.tls.certificate and http.tls.key)",
                    metadata: ["http.host": "\(http.host)"]
                )
            }
            return
        }
        logger.info(
            "HTTP API serves TLS",
            metadata: [
                "http.tls.serial": "\(tls.identity.serialNumber)",
                "http.tls.not_after": "\(tls.identity.notValidAfter.formatted(.iso8601))",
                "http.tls.client_certificates": "\(tls.files.clientCA == nil ? "not asked" : "required")",
            ]
        )
        reloadHook?.register("http.tls") { logger in
            do throws(HTTPTLSError) {
                let identity = try tls.reload()
                logger.info(
                    "HTTP API certificate reloaded; new connections use it",
                    metadata: [
                        "http.tls.serial": "\(identity.serialNumber)",
                        "http.tls.not_after": "\(identity.notValidAfter.formatted(.iso8601))",
                    ]
                )
            } catch {
                logger.error(
                    "HTTP API certificate not reloaded; the previous one stays in use",
                    metadata: [
                        "http.tls.key": "\(error.key)", "http.error": "\(error.description)",
                        "http.tls.serial": "\(tls.identity.serialNumber)",
                    ]
                )
            }
        }
    }
}
