# Sourced by scripts/imagetest.sh and scripts/imagetest-systemd.sh, so that
# the image test runs what docs/deploy.md says.
# deploy_block NAME [LANG]: the LANG (default sh) code block of
# docs/deploy.md that follows the line <!-- imagetest: NAME -->.
deploy_block() {
  awk -v mark="<!-- imagetest: $1 -->" -v fence="\`\`\`${2:-sh}" '
    $0 == mark { found = 1; next }
    found && $0 == fence { inside = 1; next }
    inside && /^```$/ { exit }
    inside { print }' docs/deploy.md
}
