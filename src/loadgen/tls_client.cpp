#include "loadgen/tls_client.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/ip/address.hpp>

#include "util/error.h"

namespace nexus::loadgen {

namespace ssl = boost::asio::ssl;

std::shared_ptr<ssl::context> make_tls_client_context(const TlsClientOptions& o) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3);
  boost::system::error_code ec;
  if (o.insecure) {
    ctx->set_verify_mode(ssl::verify_none);
    return ctx;
  }
  ctx->set_verify_mode(ssl::verify_peer);
  if (!o.ca_file.empty()) {
    ctx->load_verify_file(o.ca_file, ec);
    if (ec) throw Error("--cacert " + o.ca_file + ": " + ec.message());
  } else {
    ctx->set_default_verify_paths(ec);
    if (ec) throw Error("cannot load the system's CA certificates: " + ec.message());
  }
  return ctx;
}

bool ClientConnection::set_server_name(const std::string& host) {
  if (!tls_) return true;
  boost::system::error_code ec;
  boost::asio::ip::make_address(host, ec);
  if (ec) {  // a name: SNI (an IP address is never sent as SNI, RFC 6066 section 3)
    if (SSL_set_tlsext_host_name(tls_->native_handle(), host.c_str()) != 1) return false;
  }
  if (!tls_ctx_ || SSL_CTX_get_verify_mode(tls_ctx_->native_handle()) == SSL_VERIFY_NONE) return true;
  // The certificate must name the host (a DNS name or an IP address SAN).
  X509_VERIFY_PARAM* param = SSL_get0_param(tls_->native_handle());
  if (!ec) return X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) == 1;
  return X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0) == 1;
}

}  // namespace nexus::loadgen
