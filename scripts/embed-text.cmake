# Turns a text file into a C header holding it as a NUL-terminated char array:
#   cmake -DIN=file -DOUT=header.h -DNAME=symbol -P scripts/embed-text.cmake
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}.tmp" "/* Generated from ${IN} by scripts/embed-text.cmake: do not edit. */\nstatic const char ${NAME}[] = {\n${bytes}0x00 };\n")
file(RENAME "${OUT}.tmp" "${OUT}")
