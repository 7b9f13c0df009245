# bash completion for podscopectl(1)

_podscopectl_ids() {
    podscopectl list --quiet 2>/dev/null | cut -c1-12
}

_podscopectl_ctr_ids() {
    podscopectl ps -a --quiet 2>/dev/null | cut -c1-12
}

_podscopectl() {
    local cur prev words cword
    _init_completion 2>/dev/null || {
        cur=${COMP_WORDS[COMP_CWORD]}
        prev=${COMP_WORDS[COMP_CWORD-1]}
        words=("${COMP_WORDS[@]}")
        cword=$COMP_CWORD
    }
    local commands="list status create start stop rm remove wait update info journal pull images inspecti rmi imagefsinfo container ps inspect logs exec attach help"
    local container_verbs="create start stop rm remove update checkpoint"
    local c=1
    [[ ${words[1]} == --no-ask-password ]] && c=2
    if ((cword == c)); then
        COMPREPLY=($(compgen -W "$commands --no-ask-password --version -V --help -h" -- "$cur"))
        return
    fi
    case ${words[c]} in
        list)
            case $prev in
                --state) COMPREPLY=($(compgen -W "created ready notready" -- "$cur")); return;;
                --label) return;;
            esac
            COMPREPLY=($(compgen -W "--state --label --quiet -q" -- "$cur"))
            ;;
        status|wait)
            ((cword == c + 1)) && COMPREPLY=($(compgen -W "$(_podscopectl_ids)" -- "$cur"))
            ;;
        update)
            if ((cword == c + 1)); then
                COMPREPLY=($(compgen -W "$(_podscopectl_ids)" -- "$cur"))
            elif [[ $prev != --* ]]; then
                COMPREPLY=($(compgen -W "--memory --cpu-quota --cpu-period --cpu-shares --pids-limit" -- "$cur"))
            fi
            ;;
        start|stop|rm|remove)
            COMPREPLY=($(compgen -W "$(_podscopectl_ids)" -- "$cur"))
            ;;
        journal)
            # A sandbox or container, then journalctl's options.
            if ((cword == c + 1)); then
                COMPREPLY=($(compgen -W "$(_podscopectl_ids) $(_podscopectl_ctr_ids)" -- "$cur"))
            elif [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "-f --follow -n --lines -o --output -p --priority
                    -r --reverse -g --grep --since --until --no-pager" -- "$cur"))
            elif [[ $prev == -o || $prev == --output ]]; then
                COMPREPLY=($(compgen -W "short short-iso short-precise verbose json json-pretty cat" -- "$cur"))
            fi
            ;;
        pull)
            case $prev in
                --creds|--auth|--registry-token) return;;
            esac
            [[ $cur == -* ]] && COMPREPLY=($(compgen -W "--creds --auth --registry-token" -- "$cur"))
            ;;
        images)
            [[ $cur == -* ]] && COMPREPLY=($(compgen -W "-q --quiet" -- "$cur"))
            ;;
        create)
            case $prev in
                --pid-namespace) COMPREPLY=($(compgen -W "pod container node" -- "$cur")); return;;
                --log-directory) COMPREPLY=($(compgen -d -- "$cur")); return;;
                --namespace|--uid|--attempt|--hostname|--label|--annotation|--cgroup-parent|\
                --runtime-handler|--memory|--cpu-quota|--cpu-period|--cpu-shares|--pids-limit|\
                --port|--dns-server|--dns-search|--dns-option|--sysctl) return;;
            esac
            [[ $cur == -* ]] && COMPREPLY=($(compgen -W "--namespace --uid --attempt --hostname
                --host-network --pid-namespace --label --annotation --cgroup-parent
                --log-directory --runtime-handler --memory --cpu-quota --cpu-period
                --cpu-shares --pids-limit --port --dns-server --dns-search --dns-option
                --sysctl --start" -- "$cur"))
            ;;
        ps)
            case $prev in
                --state) COMPREPLY=($(compgen -W "created running exited unknown" -- "$cur")); return;;
                --pod|-p) COMPREPLY=($(compgen -W "$(_podscopectl_ids)" -- "$cur")); return;;
                --label) return;;
            esac
            COMPREPLY=($(compgen -W "-a --all -p --pod --state --label -q --quiet" -- "$cur"))
            ;;
        inspect)
            ((cword == c + 1)) && COMPREPLY=($(compgen -W "$(_podscopectl_ctr_ids)" -- "$cur"))
            ;;
        logs)
            [[ $cur == -* ]] && COMPREPLY=($(compgen -W "-f --follow" -- "$cur")) \
                || COMPREPLY=($(compgen -W "$(_podscopectl_ctr_ids)" -- "$cur"))
            ;;
        exec)
            [[ $prev == --timeout ]] && return
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "--timeout -i --interactive -t --tty" -- "$cur"))
            elif [[ $prev == exec || $prev == -* || $prev =~ ^[0-9]+$ ]]; then
                COMPREPLY=($(compgen -W "$(_podscopectl_ctr_ids)" -- "$cur"))
            fi
            ;;
        attach)
            [[ $cur == -* ]] && COMPREPLY=($(compgen -W "-i --interactive -t --tty" -- "$cur")) \
                || COMPREPLY=($(compgen -W "$(_podscopectl_ctr_ids)" -- "$cur"))
            ;;
        container)
            if ((cword == c + 1)); then
                COMPREPLY=($(compgen -W "$container_verbs" -- "$cur"))
                return
            fi
            case ${words[c+1]} in
                create)
                    case $prev in
                        --mount|--device|--log-path|--workdir|-w) COMPREPLY=($(compgen -f -- "$cur")); return;;
                        --env|-e|--user|-u|--label|--cap-add|--cap-drop|--memory|--cpu-quota|\
                        --cpu-period|--cpu-shares|--cpuset-cpus|--attempt) return;;
                    esac
                    if [[ $cur == -* ]]; then
                        COMPREPLY=($(compgen -W "-e --env -w --workdir -u --user --mount --device --label
                            --log-path --privileged --read-only --cap-add --cap-drop -t --tty
                            -i --stdin --memory --cpu-quota --cpu-period --cpu-shares
                            --cpuset-cpus --attempt --start" -- "$cur"))
                    elif ((cword == c + 2)); then
                        COMPREPLY=($(compgen -W "$(_podscopectl_ids)" -- "$cur"))
                    fi
                    ;;
                update)
                    if ((cword == c + 2)); then
                        COMPREPLY=($(compgen -W "$(_podscopectl_ctr_ids)" -- "$cur"))
                    elif [[ $prev != --* ]]; then
                        COMPREPLY=($(compgen -W "--memory --cpu-quota --cpu-period --cpu-shares --cpuset-cpus" -- "$cur"))
                    fi
                    ;;
                checkpoint)
                    [[ $prev == -t || $prev == --timeout ]] && return
                    if [[ $cur == -* ]]; then
                        COMPREPLY=($(compgen -W "-t --timeout --stop" -- "$cur"))
                    elif [[ ${words[cword-1]} == checkpoint || $prev =~ ^(-t|--timeout|--stop)$ ]]; then
                        COMPREPLY=($(compgen -W "$(_podscopectl_ctr_ids)" -- "$cur"))
                    else
                        COMPREPLY=($(compgen -f -- "$cur"))
                    fi
                    ;;
                stop)
                    [[ $prev == -t || $prev == --timeout ]] && return
                    if [[ $cur == -* ]]; then
                        COMPREPLY=($(compgen -W "-t --timeout" -- "$cur"))
                    else
                        COMPREPLY=($(compgen -W "$(_podscopectl_ctr_ids)" -- "$cur"))
                    fi
                    ;;
                start|rm|remove)
                    COMPREPLY=($(compgen -W "$(_podscopectl_ctr_ids)" -- "$cur"))
                    ;;
            esac
            ;;
    esac
}
complete -F _podscopectl podscopectl
